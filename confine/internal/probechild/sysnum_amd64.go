package probechild

const sysSeccomp = 317
