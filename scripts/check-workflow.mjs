// Checks GitHub Actions workflow files against GitHub's own workflow
// schema, with @actions/workflow-parser (the parser of GitHub's language
// services; it also says where an expression is not allowed):
//
//   node scripts/check-workflow.mjs PREFIX FILE...
//
// PREFIX is the directory the package is installed under (npm install
// --prefix PREFIX @actions/workflow-parser@VERSION; deploy/workflow_test.go
// installs the pinned version into the npm cache of scripts/interop.sh).
// Prints one line per error, FILE (Line: L, Col: C): message, and exits 1
// when there is any; 2 when the parser cannot be loaded or a file read.
import { readFileSync } from "node:fs";
import { register } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [prefix, ...files] = process.argv.slice(2);
if (!prefix || files.length === 0) {
  console.error("usage: node check-workflow.mjs PREFIX FILE...");
  process.exit(2);
}

// The package imports its schema (a .json file) without an import
// attribute, as a bundler allows and Node (20 and later) refuses: this
// hook adds { type: "json" } to every .json import.
const hook = `export async function load(url, context, next) {
  if (url.endsWith(".json")) {
    return next(url, { ...context, importAttributes: { ...context.importAttributes, type: "json" } });
  }
  return next(url, context);
}`;
register("data:text/javascript," + encodeURIComponent(hook));

let parser;
try {
  parser = await import(pathToFileURL(join(prefix, "node_modules/@actions/workflow-parser/dist/index.js")).href);
} catch (e) {
  console.error(`check-workflow: cannot load @actions/workflow-parser under ${prefix}: ${e.message}`);
  process.exit(2);
}

let failed = false;
for (const name of files) {
  let content;
  try {
    content = readFileSync(name, "utf8");
  } catch (e) {
    console.error(`check-workflow: ${e.message}`);
    process.exit(2);
  }
  const result = parser.parseWorkflow({ name, content }, new parser.NoOperationTraceWriter());
  // Converting the template reports what the schema alone does not (jobs
  // that need missing jobs, bad cron lines, ...) into the same list.
  if (result.value) {
    await parser.convertWorkflowTemplate(result.context, result.value);
  }
  for (const e of result.context.errors.getErrors()) {
    console.log(e.message);
    failed = true;
  }
}
process.exit(failed ? 1 : 0);
