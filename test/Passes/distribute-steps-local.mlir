// seq-distribute-steps with local=1 (rank-local steps): each rank's
// arguments and results with steps are its own steps. The pass finds them
// (seq.steps marks their step dimension) through the glue, takes the ops'
// operands as they are and gathers only what crosses ranks: states and
// transitions, the conv's tails with their lengths, attention's keys and
// values. Glue that mixes steps is an error naming the op.
// Under strict each is an error; without, the function is left out with a
// remark and named, with why, in the module's seq.not_rank_local (the
// engine's call of it is an error that says so).
// RUN: seqc-opt %s --seq-distribute-steps="ranks=2 local=1 strict=1" -split-input-file -verify-diagnostics | FileCheck %s
// RUN: seqc-opt %s --seq-distribute-steps="ranks=2 local=1" -split-input-file 2>&1 | FileCheck %s --check-prefix=LEFTOUT

// LEFTOUT: remark: @sum has no rank-local form and is left out (calling it is an error): {{.*}}distribute-steps-local.mlir:{{[0-9]+}}:8: rank-local steps: reduces over the steps (loop 1)
// LEFTOUT: module attributes {seq.not_rank_local = {sum = "{{.*}}rank-local steps: reduces over the steps (loop 1): a sum or scan along them needs every rank's steps"}}
// LEFTOUT-NOT: func.func @sum

// A projection, a scan and a norm over features: x and y hold steps in
// dimension 1, the weight and the final state none. The scan's operands are
// not sliced and its output not gathered.
// CHECK-LABEL: func.func @glue
// CHECK-SAME: (%[[X:.*]]: tensor<1x?x4xf32> {seq.steps = 1 : i64}, %[[W:.*]]: tensor<4x4xf32>)
// CHECK-SAME: -> (tensor<1x?x4xf32> {seq.steps = 1 : i64}, tensor<1x4xf32>)
// CHECK-NOT: tensor.extract_slice %[[X]]
// CHECK: %[[OWN:.*]], %{{.*}} = seq.linear_scan
// CHECK: shard.all_gather {{.*}} : tensor<1x1x4xf32> -> tensor<2x1x4xf32>
// CHECK: shard.all_gather {{.*}} : tensor<1x1x4xf32> -> tensor<2x1x4xf32>
// CHECK: %[[Y:.*]], %{{.*}} = seq.linear_scan {{.*}} init(
// CHECK-NOT: shard.all_gather
// CHECK: return
func.func @glue(%x: tensor<1x?x4xf32>, %w: tensor<4x4xf32>) -> (tensor<1x?x4xf32>, tensor<1x4xf32>) {
  %c1 = arith.constant 1 : index
  %T = tensor.dim %x, %c1 : tensor<1x?x4xf32>
  %flat = tensor.collapse_shape %x [[0, 1], [2]] : tensor<1x?x4xf32> into tensor<?x4xf32>
  %e = tensor.empty(%T) : tensor<?x4xf32>
  %zero = arith.constant 0.0 : f32
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<?x4xf32>) -> tensor<?x4xf32>
  %p = linalg.matmul ins(%flat, %w : tensor<?x4xf32>, tensor<4x4xf32>) outs(%z : tensor<?x4xf32>) -> tensor<?x4xf32>
  %a = tensor.expand_shape %p [[0, 1], [2]] output_shape [1, %T, 4] : tensor<?x4xf32> into tensor<1x?x4xf32>
  %y, %last = seq.linear_scan %a, %x : (tensor<1x?x4xf32>, tensor<1x?x4xf32>) -> (tensor<1x?x4xf32>, tensor<1x4xf32>)
  return %y, %last : tensor<1x?x4xf32>, tensor<1x4xf32>
}

// -----

// The conv: every rank's last min(T, W - 1) inputs, padded to W - 1 steps,
// and their number are gathered; the incoming state is the conv run over
// the tails of the ranks before, last over the ranks after.
// CHECK-LABEL: func.func @conv
// CHECK: shard.all_gather {{.*}} : tensor<1x1x?x3xf32> -> tensor<2x1x?x3xf32>
// CHECK: shard.all_gather {{.*}} : tensor<1x1xi64> -> tensor<2x1xi64>
// CHECK: scf.for
// CHECK: seq.causal_conv1d {{.*}} init(
// CHECK: %[[Y:.*]], %{{.*}} = seq.causal_conv1d %arg0, %arg1 init(
// CHECK: %[[LAST:.*]] = scf.for
// CHECK: seq.causal_conv1d {{.*}} init(
// CHECK: return %[[Y]], %[[LAST]]
func.func @conv(%x: tensor<1x?x3xf32>, %w: tensor<3x4xf32>) -> (tensor<1x?x3xf32>, tensor<1x3x3xf32>) {
  %y, %last = seq.causal_conv1d %x, %w : (tensor<1x?x3xf32>, tensor<3x4xf32>) -> (tensor<1x?x3xf32>, tensor<1x3x3xf32>)
  return %y, %last : tensor<1x?x3xf32>, tensor<1x3x3xf32>
}

// -----

// Attention: the keys and values of every rank, gathered padded to the
// longest rank's and copied into place, cut to what the rank's queries see.
// Without causal, the queries' counts are not exchanged.
// CHECK-LABEL: func.func @attn_all
// CHECK-COUNT-3: shard.all_gather
// CHECK-NOT: shard.all_gather
// CHECK: return
// The keys and values count the same steps on a rank (seq.step_group names
// the first of them), the queries their own.
// CHECK-LABEL: func.func @attn
// CHECK-SAME: (%{{.*}}: tensor<1x?x2x8xf32> {seq.steps = 1 : i64}, %{{.*}}: tensor<1x?x1x8xf32> {seq.step_group = 1 : i64, seq.steps = 1 : i64}, %{{.*}}: tensor<1x?x1x8xf32> {seq.step_group = 1 : i64, seq.steps = 1 : i64})
// CHECK: shard.all_gather {{.*}} : tensor<1x1xi64> -> tensor<2x1xi64>
// CHECK: shard.all_gather {{.*}} : tensor<1x1x?x1x8xf32> -> tensor<2x1x?x1x8xf32>
// CHECK: shard.all_gather {{.*}} : tensor<1x1x?x1x8xf32> -> tensor<2x1x?x1x8xf32>
// The queries' counts place the rank's queries in the whole (causal only).
// CHECK: shard.all_gather {{.*}} : tensor<1x1xi64> -> tensor<2x1xi64>
// CHECK: %[[O:.*]] = seq.attention %arg0, {{.*}} : (tensor<1x?x2x8xf32>, tensor<1x?x1x8xf32>, tensor<1x?x1x8xf32>) -> tensor<1x?x2x8xf32>
// CHECK-NEXT: return %[[O]]
func.func @attn_all(%q: tensor<1x?x2x8xf32>, %k: tensor<1x?x1x8xf32>, %v: tensor<1x?x1x8xf32>) -> tensor<1x?x2x8xf32> {
  %o = seq.attention %q, %k, %v {causal = false} : (tensor<1x?x2x8xf32>, tensor<1x?x1x8xf32>, tensor<1x?x1x8xf32>) -> tensor<1x?x2x8xf32>
  return %o : tensor<1x?x2x8xf32>
}

func.func @attn(%q: tensor<1x?x2x8xf32>, %k: tensor<1x?x1x8xf32>, %v: tensor<1x?x1x8xf32>) -> tensor<1x?x2x8xf32> {
  %o = seq.attention %q, %k, %v {causal = true} : (tensor<1x?x2x8xf32>, tensor<1x?x1x8xf32>, tensor<1x?x1x8xf32>) -> tensor<1x?x2x8xf32>
  return %o : tensor<1x?x2x8xf32>
}

// -----

// A token shift by two steps (RWKV's is by one): concat(state, x) along the
// steps, its slice [0, T) the steps shifted and [T, T + 2) the state after.
// Every rank's last min(T, 2) steps and their number are gathered; the
// state is carried over the ranks before (the rank's own shift) and then
// over the rest (the state after, which the tail slice now takes at 0). A
// concatenation of features keeps the steps as they are.
// CHECK-LABEL: func.func @shift
// CHECK-SAME: (%[[X:.*]]: tensor<1x?x4xf32> {seq.steps = 1 : i64}, %[[S:.*]]: tensor<1x2x4xf32>)
// CHECK-SAME: -> (tensor<1x?x8xf32> {seq.steps = 1 : i64}, tensor<1x2x4xf32>)
// CHECK: shard.all_gather {{.*}} : tensor<1x1x2x4xf32> -> tensor<2x1x2x4xf32>
// CHECK: shard.all_gather {{.*}} : tensor<1x1xi64> -> tensor<2x1xi64>
// CHECK: %[[IN:.*]] = scf.for {{.*}} iter_args({{.*}} = %[[S]])
// CHECK: tensor.concat dim(1)
// CHECK: %[[AFTER:.*]] = scf.for {{.*}} iter_args({{.*}} = %[[IN]])
// CHECK: %[[CAT:.*]] = tensor.concat dim(1) %[[IN]], %[[X]]
// CHECK: tensor.extract_slice %[[CAT]][0, 0, 0]
// CHECK: %[[NEXT:.*]] = tensor.extract_slice %[[AFTER]][0, 0, 0] [1, 2, 4]
// CHECK-NOT: shard.all_gather
// CHECK: return {{.*}}, %[[NEXT]]
func.func @shift(%x: tensor<1x?x4xf32>, %s: tensor<1x2x4xf32>) -> (tensor<1x?x8xf32>, tensor<1x2x4xf32>) {
  %c1 = arith.constant 1 : index
  %y, %last = seq.linear_scan %x, %x : (tensor<1x?x4xf32>, tensor<1x?x4xf32>) -> (tensor<1x?x4xf32>, tensor<1x4xf32>)
  %T = tensor.dim %x, %c1 : tensor<1x?x4xf32>
  %cat = tensor.concat dim(1) %s, %x : (tensor<1x2x4xf32>, tensor<1x?x4xf32>) -> tensor<1x?x4xf32>
  %prev = tensor.extract_slice %cat[0, 0, 0] [1, %T, 4] [1, 1, 1] : tensor<1x?x4xf32> to tensor<1x?x4xf32>
  %next = tensor.extract_slice %cat[0, %T, 0] [1, 2, 4] [1, 1, 1] : tensor<1x?x4xf32> to tensor<1x2x4xf32>
  %both = tensor.concat dim(2) %prev, %y : (tensor<1x?x4xf32>, tensor<1x?x4xf32>) -> tensor<1x?x8xf32>
  return %both, %next : tensor<1x?x8xf32>, tensor<1x2x4xf32>
}

// -----

// Steps after steps: the second sequence's would start on rank 0.
func.func @steps_after_steps(%x: tensor<1x?x4xf32>) -> tensor<1x?x4xf32> {
  %y, %last = seq.linear_scan %x, %x : (tensor<1x?x4xf32>, tensor<1x?x4xf32>) -> (tensor<1x?x4xf32>, tensor<1x4xf32>)
  // expected-error @below {{rank-local steps: concatenates along the steps, which is not a token shift (concat(state, steps): a state of static length without steps, then the steps, one row a step): each rank holds only its own steps}}
  %cat = tensor.concat dim(1) %x, %y : (tensor<1x?x4xf32>, tensor<1x?x4xf32>) -> tensor<1x?x4xf32>
  return %cat : tensor<1x?x4xf32>
}

// -----

// A cache of any length before the steps that attention does not read as
// its keys would be before every rank's steps; an empty one (a first
// call's) adds none.
func.func @cache(%x: tensor<1x?x4xf32>, %cache: tensor<1x?x4xf32>) -> tensor<1x?x4xf32> {
  %c1 = arith.constant 1 : index
  %y, %last = seq.linear_scan %x, %x : (tensor<1x?x4xf32>, tensor<1x?x4xf32>) -> (tensor<1x?x4xf32>, tensor<1x4xf32>)
  %T = tensor.dim %x, %c1 : tensor<1x?x4xf32>
  // expected-error @below {{rank-local steps: concatenates steps after a tensor of dynamic length without steps (a KV cache): every rank would see it before its own steps; an empty one, a token shift's state of static length, or a KV cache that attention reads as its keys and values, runs rank-local}}
  %cat = tensor.concat dim(1) %cache, %y : (tensor<1x?x4xf32>, tensor<1x?x4xf32>) -> tensor<1x?x4xf32>
  %prev = tensor.extract_slice %cat[0, 0, 0] [1, %T, 4] [1, 1, 1] : tensor<1x?x4xf32> to tensor<1x?x4xf32>
  return %prev : tensor<1x?x4xf32>
}

// -----

// A KV cache that attention reads (a decode step's, a chunked prefill's):
// the caches are whole, the same on every rank, and each rank gathers every
// rank's new keys and values after them (their counts, then the padded
// slices), so the attention's keys are whole (no gather of its own; its
// queries' counts place them) and so are the new caches it returns.
// CHECK-LABEL: func.func @kv_cache
// CHECK-SAME: (%[[Q:.*]]: tensor<1x?x2x8xf32> {seq.steps = 1 : i64}, %[[KC:.*]]: tensor<1x?x1x8xf32>, %[[VC:.*]]: tensor<1x?x1x8xf32>)
// CHECK-SAME: -> (tensor<1x?x2x8xf32> {seq.steps = 1 : i64}, tensor<1x?x1x8xf32>, tensor<1x?x1x8xf32>)
// CHECK: shard.all_gather {{.*}} : tensor<1x1xi64> -> tensor<2x1xi64>
// CHECK: shard.all_gather {{.*}} : tensor<1x1x?x1x8xf32> -> tensor<2x1x?x1x8xf32>
// CHECK: %[[KS:.*]] = tensor.concat dim(1) %[[KC]], %{{.*}} : (tensor<1x?x1x8xf32>, tensor<1x?x1x8xf32>) -> tensor<1x?x1x8xf32>
// CHECK: shard.all_gather {{.*}} : tensor<1x1xi64> -> tensor<2x1xi64>
// CHECK: shard.all_gather {{.*}} : tensor<1x1x?x1x8xf32> -> tensor<2x1x?x1x8xf32>
// CHECK: %[[VS:.*]] = tensor.concat dim(1) %[[VC]], %{{.*}} : (tensor<1x?x1x8xf32>, tensor<1x?x1x8xf32>) -> tensor<1x?x1x8xf32>
// The queries' counts, then the attention on the keys they see.
// CHECK: shard.all_gather {{.*}} : tensor<1x1xi64> -> tensor<2x1xi64>
// CHECK-NOT: shard.all_gather
// CHECK: %[[O:.*]] = seq.attention %[[Q]], {{.*}} : (tensor<1x?x2x8xf32>, tensor<1x?x1x8xf32>, tensor<1x?x1x8xf32>)
// CHECK: return %[[O]], %[[KS]], %[[VS]]
func.func @kv_cache(%q: tensor<1x?x2x8xf32>, %kc: tensor<1x?x1x8xf32>, %vc: tensor<1x?x1x8xf32>) -> (tensor<1x?x2x8xf32>, tensor<1x?x1x8xf32>, tensor<1x?x1x8xf32>) {
  %c1 = arith.constant 1 : index
  %T = tensor.dim %q, %c1 : tensor<1x?x2x8xf32>
  // This step's keys and values, the rank's own (as projections of its
  // steps would be).
  %k = tensor.extract_slice %q[0, 0, 0, 0] [1, %T, 1, 8] [1, 1, 1, 1] : tensor<1x?x2x8xf32> to tensor<1x?x1x8xf32>
  %v = tensor.extract_slice %q[0, 0, 1, 0] [1, %T, 1, 8] [1, 1, 1, 1] : tensor<1x?x2x8xf32> to tensor<1x?x1x8xf32>
  %ks = tensor.concat dim(1) %kc, %k : (tensor<1x?x1x8xf32>, tensor<1x?x1x8xf32>) -> tensor<1x?x1x8xf32>
  %vs = tensor.concat dim(1) %vc, %v : (tensor<1x?x1x8xf32>, tensor<1x?x1x8xf32>) -> tensor<1x?x1x8xf32>
  %o = seq.attention %q, %ks, %vs {causal = true} : (tensor<1x?x2x8xf32>, tensor<1x?x1x8xf32>, tensor<1x?x1x8xf32>) -> tensor<1x?x2x8xf32>
  return %o, %ks, %vs : tensor<1x?x2x8xf32>, tensor<1x?x1x8xf32>, tensor<1x?x1x8xf32>
}

// -----

// A KV cache before the keys only: the values would be a rank's own.
func.func @kv_cache_keys_only(%q: tensor<1x?x2x8xf32>, %kc: tensor<1x?x1x8xf32>) -> tensor<1x?x2x8xf32> {
  %c1 = arith.constant 1 : index
  %T = tensor.dim %q, %c1 : tensor<1x?x2x8xf32>
  %k = tensor.extract_slice %q[0, 0, 0, 0] [1, %T, 1, 8] [1, 1, 1, 1] : tensor<1x?x2x8xf32> to tensor<1x?x1x8xf32>
  %v = tensor.extract_slice %q[0, 0, 1, 0] [1, %T, 1, 8] [1, 1, 1, 1] : tensor<1x?x2x8xf32> to tensor<1x?x1x8xf32>
  %ks = tensor.concat dim(1) %kc, %k : (tensor<1x?x1x8xf32>, tensor<1x?x1x8xf32>) -> tensor<1x?x1x8xf32>
  // expected-error @below {{rank-local steps: the keys and values follow a KV cache both or neither (one would be whole, the other a rank's own steps)}}
  %o = seq.attention %q, %ks, %v {causal = false} : (tensor<1x?x2x8xf32>, tensor<1x?x1x8xf32>, tensor<1x?x1x8xf32>) -> tensor<1x?x2x8xf32>
  return %o : tensor<1x?x2x8xf32>
}

// -----

// A cache read as the queries too: they are each rank's own steps.
func.func @kv_cache_queries(%x: tensor<1x?x1x8xf32>, %cache: tensor<1x?x1x8xf32>) -> tensor<1x?x1x8xf32> {
  %y, %last = seq.linear_scan %x, %x : (tensor<1x?x1x8xf32>, tensor<1x?x1x8xf32>) -> (tensor<1x?x1x8xf32>, tensor<1x1x8xf32>)
  %kv = tensor.concat dim(1) %cache, %y : (tensor<1x?x1x8xf32>, tensor<1x?x1x8xf32>) -> tensor<1x?x1x8xf32>
  // expected-error @below {{rank-local steps: reads a KV cache as its queries, which are each rank's own steps}}
  %o = seq.attention %kv, %kv, %kv {causal = true} : (tensor<1x?x1x8xf32>, tensor<1x?x1x8xf32>, tensor<1x?x1x8xf32>) -> tensor<1x?x1x8xf32>
  return %o : tensor<1x?x1x8xf32>
}

// -----

// New keys that are a rank's own steps, new values that are whole.
func.func @kv_cache_mixed(%q: tensor<1x?x2x8xf32>, %kc: tensor<1x?x1x8xf32>, %vc: tensor<1x?x1x8xf32>, %vn: tensor<1x?x1x8xf32>) -> tensor<1x?x2x8xf32> {
  %c1 = arith.constant 1 : index
  %T = tensor.dim %q, %c1 : tensor<1x?x2x8xf32>
  %k = tensor.extract_slice %q[0, 0, 0, 0] [1, %T, 1, 8] [1, 1, 1, 1] : tensor<1x?x2x8xf32> to tensor<1x?x1x8xf32>
  %ks = tensor.concat dim(1) %kc, %k : (tensor<1x?x1x8xf32>, tensor<1x?x1x8xf32>) -> tensor<1x?x1x8xf32>
  %vs = tensor.concat dim(1) %vc, %vn : (tensor<1x?x1x8xf32>, tensor<1x?x1x8xf32>) -> tensor<1x?x1x8xf32>
  // expected-error @below {{rank-local steps: appends to its KV cache keys and values of which one holds each rank's own steps and the other is whole}}
  %o = seq.attention %q, %ks, %vs {causal = true} : (tensor<1x?x2x8xf32>, tensor<1x?x1x8xf32>, tensor<1x?x1x8xf32>) -> tensor<1x?x2x8xf32>
  return %o : tensor<1x?x2x8xf32>
}

// -----

// An empty cache cast to a dynamic length: the concatenation is the steps.
// CHECK-LABEL: func.func @empty_cache
// CHECK-SAME: -> (tensor<1x?x4xf32> {seq.steps = 1 : i64})
// CHECK: tensor.concat dim(1)
// CHECK-NOT: shard.all_gather
// CHECK: return
func.func @empty_cache(%x: tensor<1x?x4xf32>) -> tensor<1x?x4xf32> {
  %y, %last = seq.linear_scan %x, %x : (tensor<1x?x4xf32>, tensor<1x?x4xf32>) -> (tensor<1x?x4xf32>, tensor<1x4xf32>)
  %e = tensor.empty() : tensor<1x0x4xf32>
  %cache = tensor.cast %e : tensor<1x0x4xf32> to tensor<1x?x4xf32>
  %cat = tensor.concat dim(1) %cache, %y : (tensor<1x?x4xf32>, tensor<1x?x4xf32>) -> tensor<1x?x4xf32>
  return %cat : tensor<1x?x4xf32>
}

// -----

// The concatenation itself counts steps of every rank's.
func.func @shift_whole(%x: tensor<1x?x4xf32>, %s: tensor<1x1x4xf32>) -> tensor<1x?x4xf32> {
  %y, %last = seq.linear_scan %x, %x : (tensor<1x?x4xf32>, tensor<1x?x4xf32>) -> (tensor<1x?x4xf32>, tensor<1x4xf32>)
  %cat = tensor.concat dim(1) %s, %y : (tensor<1x1x4xf32>, tensor<1x?x4xf32>) -> tensor<1x?x4xf32>
  // expected-error @below {{rank-local steps: func.return takes a token shift's concatenation whole; only its slices [0, T) (the steps shifted) and [T, T + s), s <= k (the state after them) run rank-local}}
  return %cat : tensor<1x?x4xf32>
}

// -----

// Past the state after the steps.
func.func @shift_past(%x: tensor<1x?x4xf32>, %s: tensor<1x1x4xf32>) -> tensor<1x2x4xf32> {
  %c1 = arith.constant 1 : index
  %y, %last = seq.linear_scan %x, %x : (tensor<1x?x4xf32>, tensor<1x?x4xf32>) -> (tensor<1x?x4xf32>, tensor<1x4xf32>)
  %T = tensor.dim %y, %c1 : tensor<1x?x4xf32>
  %cat = tensor.concat dim(1) %s, %y : (tensor<1x1x4xf32>, tensor<1x?x4xf32>) -> tensor<1x?x4xf32>
  // expected-error @below {{rank-local steps: takes a token shift at neither [0, T) (the steps shifted) nor [T, T + s) with s <= 1 (the state after them), T the number of its steps}}
  %next = tensor.extract_slice %cat[0, %T, 0] [1, 2, 4] [1, 1, 1] : tensor<1x?x4xf32> to tensor<1x2x4xf32>
  return %next : tensor<1x2x4xf32>
}

// -----

// The state after the steps is at T, x's own number of steps: not at
// another size of x (here one chosen at run time).
func.func @shift_elsewhere(%x: tensor<1x?x4xf32>, %s: tensor<1x2x4xf32>, %i: index) -> tensor<1x1x4xf32> {
  %y, %last = seq.linear_scan %x, %x : (tensor<1x?x4xf32>, tensor<1x?x4xf32>) -> (tensor<1x?x4xf32>, tensor<1x4xf32>)
  %n = tensor.dim %y, %i : tensor<1x?x4xf32>
  %cat = tensor.concat dim(1) %s, %y : (tensor<1x2x4xf32>, tensor<1x?x4xf32>) -> tensor<1x?x4xf32>
  // expected-error @below {{rank-local steps: takes a token shift at neither [0, T) (the steps shifted) nor [T, T + s) with s <= 2 (the state after them), T the number of its steps}}
  %b = tensor.extract_slice %cat[0, %n, 0] [1, 1, 4] [1, 1, 1] : tensor<1x?x4xf32> to tensor<1x1x4xf32>
  return %b : tensor<1x1x4xf32>
}

// -----

// A concatenation whose first input turns out to hold steps later in the
// analysis is named as steps after steps, not as a cache.
func.func @late_steps(%x: tensor<1x?x4xf32>, %a: tensor<1x?x4xf32>) -> tensor<1x?x4xf32> {
  %y, %last = seq.linear_scan %x, %x : (tensor<1x?x4xf32>, tensor<1x?x4xf32>) -> (tensor<1x?x4xf32>, tensor<1x4xf32>)
  // expected-error @below {{rank-local steps: concatenates along the steps, which is not a token shift}}
  %cat = tensor.concat dim(1) %a, %y : (tensor<1x?x4xf32>, tensor<1x?x4xf32>) -> tensor<1x?x4xf32>
  %z, %zl = seq.linear_scan %a, %a : (tensor<1x?x4xf32>, tensor<1x?x4xf32>) -> (tensor<1x?x4xf32>, tensor<1x4xf32>)
  return %cat : tensor<1x?x4xf32>
}

// -----

// A sum over the steps needs every rank's.
func.func @sum(%x: tensor<1x?x4xf32>) -> (tensor<1x?x4xf32>, tensor<4xf32>) {
  %y, %last = seq.linear_scan %x, %x : (tensor<1x?x4xf32>, tensor<1x?x4xf32>) -> (tensor<1x?x4xf32>, tensor<1x4xf32>)
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  // expected-error @below {{rank-local steps: reduces over the steps (loop 1): a sum or scan along them needs every rank's steps}}
  %s = linalg.generic {indexing_maps = [affine_map<(b, t, c) -> (b, t, c)>, affine_map<(b, t, c) -> (c)>], iterator_types = ["reduction", "reduction", "parallel"]}
      ins(%y : tensor<1x?x4xf32>) outs(%z : tensor<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %n = arith.addf %a, %acc : f32
    linalg.yield %n : f32
  } -> tensor<4xf32>
  return %y, %s : tensor<1x?x4xf32>, tensor<4xf32>
}

// -----

// Each rank holds its own number of steps.
func.func @static(%x: tensor<1x8x4xf32>) -> tensor<1x8x4xf32> {
  // expected-error @below {{rank-local steps: a tensor of type 'tensor<1x8x4xf32>' holds the steps in dimension 1 with a static size; each rank holds its own number of steps, so that dimension must be dynamic (?)}}
  %y, %last = seq.linear_scan %x, %x : (tensor<1x8x4xf32>, tensor<1x8x4xf32>) -> (tensor<1x8x4xf32>, tensor<1x4xf32>)
  return %y : tensor<1x8x4xf32>
}

// -----

// The last step of the whole is on the last rank only.
func.func @last_step(%x: tensor<1x?x4xf32>) -> tensor<1x1x4xf32> {
  %c1 = arith.constant 1 : index
  %y, %last = seq.linear_scan %x, %x : (tensor<1x?x4xf32>, tensor<1x?x4xf32>) -> (tensor<1x?x4xf32>, tensor<1x4xf32>)
  %T = tensor.dim %y, %c1 : tensor<1x?x4xf32>
  %end = arith.subi %T, %c1 : index
  // expected-error @below {{rank-local steps: tensor.extract_slice takes steps at a position counted from the number of steps (the last step, say): each rank holds only its own steps (a token shift runs rank-local written as tensor.concat of its state and the steps, sliced)}}
  %s = tensor.extract_slice %y[0, %end, 0] [1, 1, 4] [1, 1, 1] : tensor<1x?x4xf32> to tensor<1x1x4xf32>
  return %s : tensor<1x1x4xf32>
}

// -----

// An op that does not split over ranks has no rank-local form.
func.func @reverse(%x: tensor<1x?x4xf32>) -> tensor<1x?x4xf32> {
  %y, %last = seq.linear_scan %x, %x : (tensor<1x?x4xf32>, tensor<1x?x4xf32>) -> (tensor<1x?x4xf32>, tensor<1x4xf32>)
  // expected-error @below {{rank-local steps: seq.associative_scan does not split over ranks: it has no transition over steps}}
  %r = seq.associative_scan %y {dim = 1 : i64} : (tensor<1x?x4xf32>) -> (tensor<1x?x4xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %b : f32
    seq.yield %s : f32
  }
  return %r : tensor<1x?x4xf32>
}

// -----

// A product over the steps (x^T w) needs every rank's.
func.func @product(%x: tensor<1x?x4xf32>, %w: tensor<4x4xf32>) -> (tensor<1x?x4xf32>, tensor<4x4xf32>) {
  %y, %last = seq.linear_scan %x, %x : (tensor<1x?x4xf32>, tensor<1x?x4xf32>) -> (tensor<1x?x4xf32>, tensor<1x4xf32>)
  %flat = tensor.collapse_shape %y [[0, 1], [2]] : tensor<1x?x4xf32> into tensor<?x4xf32>
  %e = tensor.empty() : tensor<4x4xf32>
  // expected-error @below {{rank-local steps: reduces over the steps (loop 2): a sum or scan along them needs every rank's steps}}
  %p = linalg.matmul ins(%w, %flat : tensor<4x4xf32>, tensor<?x4xf32>) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %y, %p : tensor<1x?x4xf32>, tensor<4x4xf32>
}

// -----

// A tensor is either a rank's own steps or whole on every rank: w is a
// matmul's weight and an addend of a tensor with steps.
func.func @both(%x: tensor<1x?x4xf32>, %w: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %y, %last = seq.linear_scan %x, %x : (tensor<1x?x4xf32>, tensor<1x?x4xf32>) -> (tensor<1x?x4xf32>, tensor<1x4xf32>)
  %flat = tensor.collapse_shape %y [[0, 1], [2]] : tensor<1x?x4xf32> into tensor<?x4xf32>
  %n = tensor.dim %flat, %c0 : tensor<?x4xf32>
  %e = tensor.empty(%n) : tensor<?x4xf32>
  %p = linalg.matmul ins(%flat, %w : tensor<?x4xf32>, tensor<?x4xf32>) outs(%e : tensor<?x4xf32>) -> tensor<?x4xf32>
  // expected-error @below {{rank-local steps: a tensor would hold no steps and steps in dimension 0; each rank must hold its own steps of a tensor or the whole of it}}
  %s = linalg.add ins(%p, %w : tensor<?x4xf32>, tensor<?x4xf32>) outs(%e : tensor<?x4xf32>) -> tensor<?x4xf32>
  return %s : tensor<?x4xf32>
}

// -----

// Packed sequences and checkpoints have no rank-local form (the pass runs
// before seq-expand-sequences under local steps).
func.func @packed(%x: tensor<1x?x4xf32>, %cu: tensor<3xi32>) -> tensor<1x?x4xf32> {
  // expected-error @below {{rank-local steps: seq.linear_scan takes packed sequences (segments), which do not run rank-local}}
  %y, %last = seq.linear_scan %x, %x segments(%cu) : (tensor<1x?x4xf32>, tensor<1x?x4xf32>, tensor<3xi32>) -> (tensor<1x?x4xf32>, tensor<2x4xf32>)
  return %y : tensor<1x?x4xf32>
}

// -----

func.func @checkpoints(%x: tensor<1x?x4xf32>) -> tensor<1x?x4xf32> {
  // expected-error @below {{rank-local steps: seq.linear_scan with checkpoint_every: checkpoints do not run rank-local}}
  %y, %last, %states = seq.linear_scan %x, %x {checkpoint_every = 4 : i64} : (tensor<1x?x4xf32>, tensor<1x?x4xf32>) -> (tensor<1x?x4xf32>, tensor<1x4xf32>, tensor<1x?x4xf32>)
  return %states : tensor<1x?x4xf32>
}

// -----

// Without an op with a time axis nothing tells a rank's own steps from
// the whole.
// expected-error @below {{rank-local steps: no argument of @plain holds steps (none reaches the time axis of a seq op that splits over ranks), so a rank's own steps cannot be told from the whole}}
func.func @plain(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %y = math.exp %x : tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}

// -----

// A MoE layer's tokens are a rank's own (dimension 0). Without capacity
// the experts run as they are and only the load crosses ranks: every
// rank's choices per expert, bad indices and tokens (E + 2 = 6 counts).
// CHECK-LABEL: func.func @experts
// CHECK-SAME: (%[[X:.*]]: tensor<?x4xf32> {seq.step_group = 0 : i64, seq.steps = 0 : i64}, %[[W:.*]]: tensor<?x2xf32> {seq.step_group = 0 : i64, seq.steps = 0 : i64}, %[[I:.*]]: tensor<?x2xi32> {seq.step_group = 0 : i64, seq.steps = 0 : i64}
// CHECK: shard.all_gather {{.*}} : tensor<1x6xi64> -> tensor<2x6xi64>
// CHECK: seq_rt.check {{.*}}expert indices of the ranks' tokens are outside [0, {1})
// CHECK: %[[LOAD:.*]] = scf.for {{.*}} -> (tensor<4xi64>)
// CHECK: %[[Y:.*]], %{{.*}} = seq.moe_ffn %[[X]], %[[W]], %[[I]], %{{.*}}, %{{.*}} : (
// CHECK-NOT: shard.
// CHECK: return %[[Y]], %[[LOAD]]
func.func @experts(%x: tensor<?x4xf32>, %w: tensor<?x2xf32>, %i: tensor<?x2xi32>, %up: tensor<4x4x8xf32>, %down: tensor<4x8x4xf32>) -> (tensor<?x4xf32>, tensor<4xi64>) {
  %y, %load = seq.moe_ffn %x, %w, %i, %up, %down : (tensor<?x4xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<4x4x8xf32>, tensor<4x8x4xf32>) -> (tensor<?x4xf32>, tensor<4xi64>)
  return %y, %load : tensor<?x4xf32>, tensor<4xi64>
}

// -----

// The router's aux loss: its first-choice counts, probability sums and
// tokens over every rank (2 E = 8 floats all-reduced, the token counts
// all-gathered). Capacity:
// the choices it drops, in token order from the ranks' before, get a
// weight of 0 and the experts run without capacity.
// CHECK-LABEL: func.func @routed
// CHECK: %[[WR:.*]], %[[IR:.*]], %{{.*}} = seq.route
// CHECK: shard.all_reduce {{.*}} : tensor<8xf32> -> tensor<8xf32>
// CHECK: shard.all_gather {{.*}} : tensor<1x1xi64> -> tensor<2x1xi64>
// CHECK: %[[AUX:.*]] = tensor.insert {{.*}} : tensor<f32>
// CHECK: shard.all_gather {{.*}} : tensor<1x6xi64> -> tensor<2x6xi64>
// CHECK: %[[KEPT:.*]]:2 = scf.for
// CHECK: %[[Y:.*]], %{{.*}} = seq.moe_ffn %{{.*}}, %[[KEPT]]#0, %[[IR]], %{{.*}}, %{{.*}} : (
// CHECK: return %[[Y]], %[[AUX]]
func.func @routed(%x: tensor<1x?x4xf32>, %wr: tensor<4x4xf32>, %up: tensor<4x4x8xf32>, %down: tensor<4x8x4xf32>) -> (tensor<?x4xf32>, tensor<f32>) {
  %y, %last = seq.linear_scan %x, %x : (tensor<1x?x4xf32>, tensor<1x?x4xf32>) -> (tensor<1x?x4xf32>, tensor<1x4xf32>)
  %c0 = arith.constant 0 : index
  %flat = tensor.collapse_shape %y [[0, 1], [2]] : tensor<1x?x4xf32> into tensor<?x4xf32>
  %T = tensor.dim %flat, %c0 : tensor<?x4xf32>
  %e = tensor.empty(%T) : tensor<?x4xf32>
  %zero = arith.constant 0.0 : f32
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<?x4xf32>) -> tensor<?x4xf32>
  %logits = linalg.matmul ins(%flat, %wr : tensor<?x4xf32>, tensor<4x4xf32>) outs(%z : tensor<?x4xf32>) -> tensor<?x4xf32>
  %w, %i, %aux = seq.route %logits {k = 2 : i64, aux_loss_coef = 0.01 : f32} : (tensor<?x4xf32>) -> (tensor<?x2xf32>, tensor<?x2xi32>, tensor<f32>)
  %o, %load = seq.moe_ffn %flat, %w, %i, %up, %down {capacity_factor = 1.25 : f32} : (tensor<?x4xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<4x4x8xf32>, tensor<4x8x4xf32>) -> (tensor<?x4xf32>, tensor<4xi64>)
  return %o, %aux : tensor<?x4xf32>, tensor<f32>
}

// -----

// [B, T] -> [B T] with B > 1 interleaves the ranks' steps.
func.func @batch_major(%x: tensor<2x?x4xf32>) -> tensor<?x4xf32> {
  %y, %last = seq.linear_scan %x, %x : (tensor<2x?x4xf32>, tensor<2x?x4xf32>) -> (tensor<2x?x4xf32>, tensor<2x4xf32>)
  // expected-error @below {{rank-local steps: merges the steps with a dimension that is dynamic, empty or outside them (a rank's steps must stay one run: [1, T, C] -> [T C] does, [B, T] -> [B T] does not)}}
  %flat = tensor.collapse_shape %y [[0, 1], [2]] : tensor<2x?x4xf32> into tensor<?x4xf32>
  return %flat : tensor<?x4xf32>
}

// -----

// A table cut to the sequence's length is not a rank's own steps.
func.func @table(%x: tensor<1x?x4xf32>, %table: tensor<1x?x4xf32>) -> tensor<1x?x4xf32> {
  %c1 = arith.constant 1 : index
  %T = tensor.dim %x, %c1 : tensor<1x?x4xf32>
  // expected-error @below {{rank-local steps: sizes a slice's steps by the number of steps of a tensor that counts other steps (a table cut to the sequence's length is not a rank's own steps)}}
  %rows = tensor.extract_slice %table[0, 0, 0] [1, %T, 4] [1, 1, 1] : tensor<1x?x4xf32> to tensor<1x?x4xf32>
  %y, %last = seq.linear_scan %x, %rows : (tensor<1x?x4xf32>, tensor<1x?x4xf32>) -> (tensor<1x?x4xf32>, tensor<1x4xf32>)
  return %y : tensor<1x?x4xf32>
}

// -----

// A choice made on the number of steps differs on each rank.
func.func @choice(%x: tensor<1x?x4xf32>, %a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<1x?x4xf32>, tensor<4xf32>) {
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %y, %last = seq.linear_scan %x, %x : (tensor<1x?x4xf32>, tensor<1x?x4xf32>) -> (tensor<1x?x4xf32>, tensor<1x4xf32>)
  %T = tensor.dim %y, %c1 : tensor<1x?x4xf32>
  %long = arith.cmpi sgt, %T, %c16 : index
  // expected-error @below {{rank-local steps: arith.select decides on the number of steps; each rank sees only its own}}
  %w = arith.select %long, %a, %b : tensor<4xf32>
  return %y, %w : tensor<1x?x4xf32>, tensor<4xf32>
}

// -----

// The number of steps sizes the steps only.
func.func @square(%x: tensor<1x?x4xf32>) -> (tensor<1x?x4xf32>, tensor<?x?xf32>) {
  %c1 = arith.constant 1 : index
  %y, %last = seq.linear_scan %x, %x : (tensor<1x?x4xf32>, tensor<1x?x4xf32>) -> (tensor<1x?x4xf32>, tensor<1x4xf32>)
  %T = tensor.dim %y, %c1 : tensor<1x?x4xf32>
  // expected-error @below {{rank-local steps: tensor.empty uses the number of steps as a value; each rank sees only its own}}
  %e = tensor.empty(%T, %T) : tensor<?x?xf32>
  %zero = arith.constant 0.0 : f32
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %y, %z : tensor<1x?x4xf32>, tensor<?x?xf32>
}

// -----

// A result without the steps written from every step keeps the last one.
func.func @last_wins(%x: tensor<1x?x4xf32>) -> (tensor<1x?x4xf32>, tensor<4xf32>) {
  %y, %last = seq.linear_scan %x, %x : (tensor<1x?x4xf32>, tensor<1x?x4xf32>) -> (tensor<1x?x4xf32>, tensor<1x4xf32>)
  %e = tensor.empty() : tensor<4xf32>
  // expected-error @below {{rank-local steps: writes its result #0 once for every step (the last step wins)}}
  %s = linalg.generic {indexing_maps = [affine_map<(b, t, c) -> (b, t, c)>, affine_map<(b, t, c) -> (c)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%y : tensor<1x?x4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    linalg.yield %a : f32
  } -> tensor<4xf32>
  return %y, %s : tensor<1x?x4xf32>, tensor<4xf32>
}

// -----

func.func @unranked(%x: tensor<1x?x4xf32>) -> tensor<*xf32> {
  %y, %last = seq.linear_scan %x, %x : (tensor<1x?x4xf32>, tensor<1x?x4xf32>) -> (tensor<1x?x4xf32>, tensor<1x4xf32>)
  // expected-error @below {{rank-local steps: casts a tensor with steps to or from an unranked one}}
  %u = tensor.cast %y : tensor<1x?x4xf32> to tensor<*xf32>
  return %u : tensor<*xf32>
}
