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

def Seq_PackedSequencesOpInterface
    : OpInterface<"PackedSequencesOpInterface"> {
  let cppNamespace = "::seqc::seq";
  let description = [{
    An op that takes a packed variable-length batch: `segments(%cu)` (SPEC
    section 1, flash-attention's and fla's `cu_seqlens`) says that its time
    axis holds `S` sequences back to back. `seq-expand-sequences` runs such
    an op as a loop over its sequences, each the op's plain form.
  }];
  let methods = [
    InterfaceMethod<"The offsets of the sequences (`S + 1` of them), or null.",
      "::mlir::Value", "getSegments">,
    InterfaceMethod<"The segments operand, to drop it.",
      "::mlir::MutableOperandRange", "getSegmentsMutable">
  ];
}

def Seq_StatefulOpInterface : OpInterface<"StatefulOpInterface"> {
  let cppNamespace = "::seqc::seq";
  let description = [{
    An op with a recurrent state: `init(%s0)` in, `last` out, so that a
    sequence run in pieces with the state carried equals the whole. With
    `checkpoint_every = n` it also returns the state after every `n` steps
    (SPEC section 1), which `seq-expand-sequences` computes by running the
    op in pieces of `n` steps.
  }];
  let methods = [
    InterfaceMethod<"The initial state, or null.", "::mlir::Value", "getInit">,
    InterfaceMethod<"The init operand, to set it.",
      "::mlir::MutableOperandRange", "getInitMutable">,
    InterfaceMethod<"The final state.", "::mlir::Value", "getLast">,
    InterfaceMethod<"The checkpointed states, or null.", "::mlir::Value",
      "getCheckpoints">,
    InterfaceMethod<"Steps between checkpoints (0: none).", "uint64_t",
      "getCheckpointEvery">
  ];
}

#endif // SEQ_INTERFACES_TD
