// Package fuzz holds gosdma's fuzz targets. It has no API: run them with
//
//	go test -run=XXX -fuzz=FuzzTxAdd -fuzztime=20s ./fuzz
//	go test -run=XXX -fuzz=FuzzTxAddSplit -fuzztime=20s ./fuzz
//
// The seed corpora under testdata/fuzz/<FuzzName>/ hold the boundary cases and run with every
// plain go test.
package fuzz
