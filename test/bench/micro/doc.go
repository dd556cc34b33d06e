// Package micro holds Go benchmarks (testing.B) of the pure functions that run on
// every sync of mini-kcm's controllers, at the sizes the end-to-end benchmarks reach:
//
//	go test -run '^$' -bench . -benchmem ./test/bench/micro/
//
// They use only exported APIs, so they measure what the controllers call.
package micro
