package main

// The built-in features: importing the package registers every one.
import _ "github.com/tollgate/tollgate/features"
