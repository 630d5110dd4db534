//===- SeqInterfaces.td - interfaces of the seq dialect ----*- tablegen -*-===//

#ifndef SEQ_INTERFACES_TD
#define SEQ_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Seq_ShapeSignatureOpInterface : OpInterface<"ShapeSignatureOpInterface"> {
  let cppNamespace = "::seqc::seq";
  let description = [{
    An op that declares the shape of each operand and result in terms of
    named dimensions (B, T, H, ...). One declaration drives both the static
    verifier (which names the operand and dimension of every mismatch) and the
    run-time checks that lowerings emit for dynamic dimensions.
  }];
  let methods = [
    InterfaceMethod<
      "Declares every operand and result shape into `sig`.",
      "void", "buildShapeSignature",
      (ins "::seqc::seq::ShapeSignature &":$sig)>
  ];
}

#endif // SEQ_INTERFACES_TD
