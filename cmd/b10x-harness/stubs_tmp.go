package main

type doctorCmd struct{}
type execCmd struct{}
