package session

import "github.com/b10x/harness/policy"

// LoadedFile is a policy file read and checked (a policy.File, whose
// values were checked with Checks): its values, which keys it sets and
// where.
type LoadedFile struct{ *policy.File }

// LoadFile reads the policy file at path strictly (policy.Load with
// Checks): an unknown key, a value of the wrong type or a bad value is an
// *Error at the file's position and key ("ci.toml:4:1: confne: unknown
// key"). Nothing is started.
func LoadFile(path string) (*LoadedFile, error) { return loaded(policy.Load(path, Checks)) }

// ParseFile is LoadFile of content read from path.
func ParseFile(path string, content []byte) (*LoadedFile, error) {
	return loaded(policy.Parse(path, content, Checks))
}

func loaded(f *policy.File, err error) (*LoadedFile, error) {
	if err != nil {
		return nil, err
	}
	return &LoadedFile{f}, nil
}

// Apply sets in p every key the file sets, each checked, with the file's
// position as its source; an error names the key at its position.
func (lf *LoadedFile) Apply(p *Policy) error { return lf.File.Apply(&p.Policy) }
