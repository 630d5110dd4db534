//===- TestModules.h - small MLIR modules the API tests compile -*- C++ -*-===//

#ifndef SEQC_UNITTESTS_TESTMODULES_H
#define SEQC_UNITTESTS_TESTMODULES_H

namespace seqc::test {

/// @main: a linear scan with a dynamic T; @twice: x + x with a named
/// argument; @hidden: private, so not callable.
inline const char *kScanModule = R"(
func.func @main(%a: tensor<2x?x3xf32>, %b: tensor<2x?x3xf32>) -> (tensor<2x?x3xf32>, tensor<2x3xf32>) {
  %h, %l = seq.linear_scan %a, %b
    : (tensor<2x?x3xf32>, tensor<2x?x3xf32>) -> (tensor<2x?x3xf32>, tensor<2x3xf32>)
  return %h, %l : tensor<2x?x3xf32>, tensor<2x3xf32>
}
func.func @twice(%x: tensor<4xf32> {seq.name = "x"}) -> tensor<4xf32> {
  %y = arith.addf %x, %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func private @hidden(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
)";

} // namespace seqc::test

#endif // SEQC_UNITTESTS_TESTMODULES_H
