package main

type execCmd struct{}
