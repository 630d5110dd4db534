// The seq_rt verifiers: a clear error and exit status 1.
// RUN: seqc-opt %s -split-input-file -verify-diagnostics

func.func @check_placeholder(%c: i1, %a: index) {
  // expected-error @+1 {{'seq_rt.check' op message refers to {1} but only 1 values are given}}
  seq_rt.check %c, "got {0} and {1}" (%a : index)
  return
}

// -----

func.func @check_empty(%c: i1) {
  // expected-error @+1 {{'seq_rt.check' op needs a message}}
  seq_rt.check %c, ""
  return
}

// -----

func.func @unknown_callee(%n: index) {
  // expected-error @+1 {{'seq_rt.parallel_for' op refers to an unknown function @nowhere}}
  seq_rt.parallel_for %n, @nowhere(%n) : index
  return
}

// -----

func.func private @kernel(%begin: index, %a: memref<?xf32>)

func.func @bad_callee(%n: index, %a: memref<?xf32>) {
  // expected-error @+1 {{'seq_rt.parallel_for' op callee must take (index, index) followed by the 1 shared arguments}}
  seq_rt.parallel_for %n, @kernel(%a) : memref<?xf32>
  return
}
