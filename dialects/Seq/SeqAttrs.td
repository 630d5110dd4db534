//===- SeqAttrs.td - enum attributes of the seq dialect ----*- tablegen -*-===//

#ifndef SEQ_ATTRS_TD
#define SEQ_ATTRS_TD

include "Seq/SeqDialect.td"
include "mlir/IR/EnumAttr.td"

class Seq_EnumAttr<EnumAttrInfo info, string mnemonic>
    : EnumAttr<Seq_Dialect, info, mnemonic> {
  let assemblyFormat = "`<` $value `>`";
}

def Seq_Discretization : I32EnumAttr<"Discretization",
    "discretization of the continuous-time selective SSM", [
  I32EnumAttrCase<"zoh_euler", 0>,
  I32EnumAttrCase<"zoh", 1>
]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::seqc::seq";
}
def Seq_DiscretizationAttr : Seq_EnumAttr<Seq_Discretization, "discretization">;

def Seq_FeatureMap : I32EnumAttr<"FeatureMap",
    "feature map phi applied to queries and keys of linear attention", [
  I32EnumAttrCase<"identity", 0>,
  I32EnumAttrCase<"elu_plus_one", 1>,
  I32EnumAttrCase<"relu", 2>
]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::seqc::seq";
}
def Seq_FeatureMapAttr : Seq_EnumAttr<Seq_FeatureMap, "feature_map">;

def Seq_Activation : I32EnumAttr<"Activation", "pointwise activation", [
  I32EnumAttrCase<"none", 0>,
  I32EnumAttrCase<"silu", 1>,
  I32EnumAttrCase<"gelu", 2>,
  I32EnumAttrCase<"relu", 3>
]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::seqc::seq";
}
def Seq_ActivationAttr : Seq_EnumAttr<Seq_Activation, "activation">;

def Seq_Score : I32EnumAttr<"Score", "router gate scoring", [
  I32EnumAttrCase<"softmax_topk", 0>,
  I32EnumAttrCase<"softmax", 1>,
  I32EnumAttrCase<"sigmoid", 2>
]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::seqc::seq";
}
def Seq_ScoreAttr : Seq_EnumAttr<Seq_Score, "score">;

def Seq_RandomFeatures : I32EnumAttr<"RandomFeatures",
    "Performer FAVOR+ random feature kind", [
  I32EnumAttrCase<"positive", 0>,
  I32EnumAttrCase<"trigonometric", 1>
]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::seqc::seq";
}
def Seq_RandomFeaturesAttr : Seq_EnumAttr<Seq_RandomFeatures, "random_features">;

//===----------------------------------------------------------------------===//
// The strategy of a chunked-family op (seq-select-strategy)
//===----------------------------------------------------------------------===//

def Seq_PlanKind : I32EnumAttr<"PlanKind",
    "how a sequence op is computed", [
  I32EnumAttrCase<"recurrent", 0>,
  I32EnumAttrCase<"chunked", 1>,
  I32EnumAttrCase<"global", 2>
]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::seqc::seq";
}

def Seq_PlanAttr : AttrDef<Seq_Dialect, "Plan"> {
  let mnemonic = "plan";
  let summary = "how one op is computed, chosen once for every target";
  let description = [{
    Set as the discardable attribute `seq.plan` on `seq.ssd` and
    `seq.linear_attention` by `seq-select-strategy`, and read by the CPU and
    GPU lowerings alike:

    - `#seq.plan<recurrent>`: the recurrence, one step after another (decode,
      short sequences);
    - `#seq.plan<chunked, Q>`: chunks of `Q` steps (intra-chunk products,
      chunk states, state passing over chunks, output correction);
    - `#seq.plan<global>`: one state over the whole sequence (non-causal
      linear attention).

    A plan written in the input is kept (the pass fills in only missing
    ones), so a test or a user can force one.
  }];
  let parameters = (ins EnumParameter<Seq_PlanKind>:$kind,
                        DefaultValuedParameter<"int64_t", "0">:$chunk);
  let assemblyFormat = "`<` $kind (`,` $chunk^)? `>`";
  let genVerifyDecl = 1;
}

#endif // SEQ_ATTRS_TD
