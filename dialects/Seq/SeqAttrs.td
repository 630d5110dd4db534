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

#endif // SEQ_ATTRS_TD
