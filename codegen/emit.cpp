#include "codegen/emit.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "codegen/jit.hpp"
#include "codegen/llvm_headers.hpp"
#include "codegen/lowering.hpp"
#include "codegen/math.hpp"
#include "codegen/narrow_float.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/rules.hpp"

namespace tessel::codegen {

using llvm::Value;

namespace {

// Output blocks along the last dimension: long rows split into several items.
constexpr std::int64_t kRowBlock = 8192;
// The elementwise loop's interleave count: a transcendental's dependency chain (sin,
// then rounding for narrow floats) is long, and independent vectors in flight
// hide it (LLVM leaves such loops at 1).
constexpr unsigned kInterleave = 4;
// Column reductions: output columns per work item.
constexpr std::int64_t kColumnBlock = 2048;
// argmax's search for the extreme value: elements tested per branch.
constexpr std::int64_t kFindChunk = 16;

}  // namespace

namespace {

// ------------------------------------------------------------------ the emitter

class Emitter final : public ExprEmitter {
 public:
  Emitter(const Step& step, llvm::LLVMContext& ctx, llvm::Module& m, int alias_read = -1, bool stream = false)
      : ExprEmitter(ctx), step_(step), m_(m), alias_read_(alias_read), stream_(stream) {
    for (auto& r : step.reads) leaves_.insert(r.get());
    has_f32_trig_ = computes_f32_trig();
  }

  // Emits the kernel `name`; returns (work items, elements per item).
  std::pair<std::int64_t, std::int64_t> build(const std::string& name) {
    llvm::Type* ptr = b.getPtrTy();
    llvm::Type* i64 = b.getInt64Ty();
    // The body takes each buffer as a noalias argument, so the vectoriser
    // knows the output does not overlap the inputs.
    std::vector<llvm::Type*> body_args(step_.reads.size() + 1, ptr);
    body_args.push_back(i64);
    body_args.push_back(i64);
    auto* body_ty = llvm::FunctionType::get(b.getVoidTy(), body_args, false);
    auto* body = llvm::Function::Create(body_ty, llvm::Function::InternalLinkage, name + "_body", m_);
    for (size_t i = 0; i <= step_.reads.size(); ++i) {
      body->addParamAttr(unsigned(i), llvm::Attribute::NoAlias);
      body->addParamAttr(unsigned(i), llvm::Attribute::NoCapture);
    }
    body->addFnAttr(llvm::Attribute::NoUnwind);
    // A streaming kernel's output is a line-aligned block (its caller checks):
    // its vector stores are aligned where the rows are, and the JIT makes
    // those non-temporal (jit.cpp, kStreamAttr).
    if (stream_) {
      body->addParamAttr(0, llvm::Attribute::getWithAlignment(ctx_, llvm::Align(kStreamAlign)));
      body->addFnAttr(kStreamAttr);
    }
    b.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", body));
    out_ = body->getArg(0);
    for (size_t i = 0; i < step_.reads.size(); ++i)
      base_[step_.reads[i].get()] = int(i) == alias_read_ ? out_ : body->getArg(unsigned(i + 1));
    Value* begin = body->getArg(unsigned(step_.reads.size() + 1));
    Value* end = body->getArg(unsigned(step_.reads.size() + 2));
    std::pair<std::int64_t, std::int64_t> shape;
    if (step_.kind == StepKind::Loop) shape = emit_loop(begin, end);
    else shape = emit_reduce(begin, end);
    b.CreateRetVoid();

    // The entry point unpacks the buffer array.
    auto* entry_ty = llvm::FunctionType::get(b.getVoidTy(), {ptr, i64, i64}, false);
    auto* entry = llvm::Function::Create(entry_ty, llvm::Function::ExternalLinkage, name, m_);
    b.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", entry));
    std::vector<Value*> args;
    for (size_t i = 0; i <= step_.reads.size(); ++i)
      args.push_back(b.CreateLoad(ptr, b.CreateConstGEP1_64(ptr, entry->getArg(0), i)));
    if (stream_) {
      auto* align = llvm::MDNode::get(ctx_, llvm::ConstantAsMetadata::get(b.getInt64(kStreamAlign)));
      llvm::cast<llvm::LoadInst>(args[0])->setMetadata(llvm::LLVMContext::MD_align, align);
      llvm::cast<llvm::LoadInst>(args[0])->setMetadata(kStreamAttr, llvm::MDNode::get(ctx_, {}));
      entry->addFnAttr(kStreamAttr);
    }
    args.push_back(entry->getArg(1));
    args.push_back(entry->getArg(2));
    b.CreateCall(body, args);
    b.CreateRetVoid();
    return shape;
  }

 private:
  // ---------------------------------------------------------------- types and constants

  // ---------------------------------------------------------------- loops

  // for (i = lo; i < hi; ++i) body(i); the builder ends after the loop.
  // `interleave`: the vectoriser's interleave count for this loop (0: its own choice).
  void loop(Value* lo, Value* hi, const std::function<void(Value*)>& body, unsigned interleave = 0) {
    llvm::Function* f = b.GetInsertBlock()->getParent();
    llvm::BasicBlock* pre = b.GetInsertBlock();
    auto* header = llvm::BasicBlock::Create(ctx_, "loop", f);
    auto* inner = llvm::BasicBlock::Create(ctx_, "body", f);
    auto* exit = llvm::BasicBlock::Create(ctx_, "exit", f);
    b.CreateBr(header);
    b.SetInsertPoint(header);
    llvm::PHINode* i = b.CreatePHI(b.getInt64Ty(), 2);
    i->addIncoming(lo, pre);
    b.CreateCondBr(b.CreateICmpSLT(i, hi), inner, exit);
    b.SetInsertPoint(inner);
    body(i);
    Value* next = b.CreateAdd(i, i64c(1), "", true, true);
    i->addIncoming(next, b.GetInsertBlock());
    llvm::BranchInst* latch = b.CreateBr(header);
    if (interleave || scalar_loops_) {
      // The rare path of a guarded block (libm calls) stays scalar.
      llvm::Metadata* count[] = {
          llvm::MDString::get(ctx_, scalar_loops_ ? "llvm.loop.vectorize.enable" : "llvm.loop.interleave.count"),
          scalar_loops_ ? llvm::ConstantAsMetadata::get(b.getFalse())
                        : llvm::ConstantAsMetadata::get(b.getInt32(interleave))};
      auto self = llvm::MDNode::getTemporary(ctx_, {});
      llvm::Metadata* ops[] = {self.get(), llvm::MDNode::get(ctx_, count)};
      llvm::MDNode* md = llvm::MDNode::get(ctx_, ops);
      md->replaceOperandWith(0, md);
      latch->setMetadata(llvm::LLVMContext::MD_loop, md);
    }
    b.SetInsertPoint(exit);
  }

  // ---------------------------------------------------------------- memory

  Value* load(const Node& n, Value* base, const Index& idx) {
    llvm::Type* mt = mem_type(n.dtype());
    Value* p = b.CreateInBoundsGEP(mt, base, linearize(idx, n.shape()));
    Value* v = b.CreateLoad(mt, p);
    if (n.dtype() == DType::bool_) v = b.CreateICmpNE(v, b.getInt8(0));
    if (is_narrow_float(n.dtype())) v = narrow_decode(b, v, n.dtype());
    return v;
  }

  // Runs body (which emits a block's loops and stores) so that float32
  // trig runs its vector polynomial alone where it can: the block runs with
  // the polynomial, noting arguments beyond kTrigFastLimit, and where it
  // met one, runs again in a scalar loop with libm's result beyond the
  // limit (body starts its block afresh: a reduction re-initialises). A
  // kernel writing over one of its reads (alias_read_) could not read its
  // block again: it looks first, in a pass whose stores are not emitted
  // (so the rest of it is dead code), then runs one way or the other.
  // Without float32 trig, body as it is.
  void guarded(const std::function<void()>& body) {
    if (!has_f32_trig_) {
      body();
      return;
    }
    llvm::Function* f = b.GetInsertBlock()->getParent();
    if (!trig_flag_) {
      llvm::IRBuilder<> entry(&f->getEntryBlock(), f->getEntryBlock().begin());
      trig_flag_ = entry.CreateAlloca(b.getInt32Ty());
    }
    const bool look_first = alias_read_ >= 0;
    b.CreateStore(b.getInt32(0), trig_flag_);
    trig_ = Trig::Scan;
    skip_stores_ = look_first;
    body();
    skip_stores_ = false;
    Value* large = b.CreateICmpUGT(b.CreateLoad(b.getInt32Ty(), trig_flag_),
                                   b.getInt32(std::bit_cast<std::uint32_t>(float(kTrigFastLimit))));
    auto* slow = llvm::BasicBlock::Create(ctx_, "trig_large", f);
    auto* fast = look_first ? llvm::BasicBlock::Create(ctx_, "trig_fast", f) : nullptr;
    auto* done = llvm::BasicBlock::Create(ctx_, "trig_done", f);
    b.CreateCondBr(large, slow, look_first ? fast : done);
    b.SetInsertPoint(slow);
    trig_ = Trig::Precise;
    scalar_loops_ = true;
    memo_.clear();
    body();
    scalar_loops_ = false;
    b.CreateBr(done);
    if (look_first) {
      b.SetInsertPoint(fast);
      trig_ = Trig::Fast;
      memo_.clear();
      body();
      b.CreateBr(done);
    }
    b.SetInsertPoint(done);
    trig_ = Trig::Precise;
    memo_.clear();
  }

  // Whether the step computes float32 (or narrow float) sin, cos or tan.
  bool computes_f32_trig() const {
    std::unordered_set<const Node*> seen;
    std::vector<const Node*> todo = {step_.node.get()};
    while (!todo.empty()) {
      const Node* n = todo.back();
      todo.pop_back();
      if (!seen.insert(n).second) continue;
      if ((n->op == Op::sin || n->op == Op::cos || n->op == Op::tan) &&
          (n->dtype() == DType::float32 || is_narrow_float(n->dtype())))
        return true;
      if (leaves_.count(n) && n != step_.node.get()) continue;  // loaded, not computed here
      for (auto& i : n->in) todo.push_back(i.get());
    }
    return false;
  }

  void store(DType t, Value* flat, Value* v) {
    if (skip_stores_) return;
    llvm::Type* mt = mem_type(t);
    if (t == DType::bool_) v = b.CreateZExt(v, mt);
    if (is_narrow_float(t)) v = narrow_encode(b, v, t);  // v is on the grid (value() rounds)
    b.CreateStore(v, b.CreateInBoundsGEP(mt, out_, flat));
  }

  // ---------------------------------------------------------------- expressions

  // Whether an op's narrow-float result needs rounding: not when it picks or
  // moves values already on the grid, or converts (convert_value rounds).
  static bool rounds(Op op) {
    switch (op_family(op)) {
      case OpFamily::Shape: case OpFamily::Select: case OpFamily::Convert: case OpFamily::Annotation:
        return false;
      default: return op != Op::constant && op != Op::parameter;
    }
  }

  // A constant +-2^k (k >= 0), looked for through broadcasts, reshapes and
  // converts to floats (which keep such a value, or make it inf or NaN: the
  // product is then inf or NaN, on the grid too; an integer convert could
  // saturate 256 to 127).
  static bool power_of_two_at_least_one(const Node* n) {
    while (n->op == Op::broadcast_in_dim || n->op == Op::reshape ||
           (n->op == Op::convert && (is_floating(n->dtype()) || is_narrow_float(n->dtype()))))
      n = n->in[0].get();
    if (n->op != Op::constant) return false;
    const Literal& l = *n->attr<attr::Constant>().value;
    if (numel(l.shape) != 1) return false;
    int e = 0;
    const double m = std::frexp(std::fabs(l.as_double(0)), &e);
    return m == 0.5 && e >= 1;
  }
  // Whether n's float32 result is on its grid already, its operands being
  // on theirs: a bfloat16 times +-2^k, k >= 0, is exact or overflows to the
  // infinity rounding would give (float's exponent range; not float16's),
  // and a NaN from it is quiet with the payload's top bits kept.
  static bool exact_on_grid(const Node& n) {
    return n.dtype() == DType::bfloat16 && n.op == Op::mul &&
           (power_of_two_at_least_one(n.in[0].get()) || power_of_two_at_least_one(n.in[1].get()));
  }

  Value* value(const NodeRef& n, const Index& idx) override {
    auto base = base_.find(n.get());
    if (base != base_.end()) return load(*n, base->second, idx);
    auto key = std::make_pair(n.get(), idx);
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    Value* v = lower_expr(*this, *n, idx);
    // A narrow float is rounded at each op's result (codegen/narrow_float.hpp).
    if (is_narrow_float(n->dtype()) && rounds(n->op) && !exact_on_grid(*n)) v = narrow_round(b, v, n->dtype());
    memo_[key] = v;
    return v;
  }

  // ---------------------------------------------------------------- kernels

  std::pair<std::int64_t, std::int64_t> emit_loop(Value* begin, Value* end) {
    const Node& root = *step_.node;
    const Shape& s = root.shape();
    if (s.empty() || numel(s) == 0) {
      if (numel(s) == 1) {
        memo_.clear();
        store(root.dtype(), i64c(0), value(step_.node, {}));
      }
      return {1, 1};
    }
    const std::int64_t last = s.back();
    const std::int64_t rows = numel(s) / last;
    const std::int64_t block = std::min(last, kRowBlock);
    const std::int64_t nb = ceil_div(last, block);
    Shape row_shape(s.begin(), s.end() - 1);
    const std::vector<std::int64_t> cuts = last_dim_pieces();
    loop(begin, end, [&](Value* item) {
      Value* row = b.CreateUDiv(item, i64c(nb));
      Value* jb = b.CreateURem(item, i64c(nb));
      Value* j0 = b.CreateMul(jb, i64c(block));
      Value* j1 = b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b.CreateAdd(j0, i64c(block)), i64c(last));
      Index row_idx = unflatten(row, row_shape);
      Value* row_base = b.CreateMul(row, i64c(last));
      guarded([&] {
        // The row in pieces between the cuts, each its own loop (ExprEmitter::piece_iv).
        for (std::size_t p = 0; p + 1 < cuts.size(); ++p) {
          Value* lo = cuts.size() > 2 ? b.CreateBinaryIntrinsic(llvm::Intrinsic::smax, j0, i64c(cuts[p])) : j0;
          Value* hi = cuts.size() > 2 ? b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, j1, i64c(cuts[p + 1])) : j1;
          loop(lo, hi, [&](Value* j) {
            Index idx = row_idx;
            idx.push_back(j);
            memo_.clear();
            if (cuts.size() > 2) piece_iv = j, piece_lo = cuts[p], piece_hi = cuts[p + 1];
            store(root.dtype(), b.CreateAdd(row_base, j), value(step_.node, idx));
            piece_iv = nullptr;
          }, kInterleave);
        }
      });
    });
    return {rows * nb, block};
  }

  // 0, the last dim's offsets where a concatenation along it, reached from
  // the root through elementwise ops of the root's shape (which index their
  // operands as the root is indexed), passes from one operand to the next,
  // and the last dim's size.
  std::vector<std::int64_t> last_dim_pieces() const {
    const Node& root = *step_.node;
    const Shape& s = root.shape();
    std::set<std::int64_t> cuts = {0, s.back()};
    std::unordered_set<const Node*> seen;
    std::vector<const Node*> todo{&root};
    while (!todo.empty()) {
      const Node* n = todo.back();
      todo.pop_back();
      if (!seen.insert(n).second || n->shape() != s || (leaves_.count(n) && n != &root)) continue;
      if (n->op == Op::concatenate && n->attr<attr::Dimension>().dimension == std::int64_t(s.size()) - 1) {
        std::int64_t offset = 0;
        for (auto& x : n->in) cuts.insert(offset += x->shape().back());
      }
      if (is_elementwise(n->op))
        for (auto& x : n->in) todo.push_back(x.get());
    }
    if (cuts.size() > 34) return {0, s.back()};  // a few pieces, not a loop per column
    return std::vector<std::int64_t>(cuts.begin(), cuts.end());
  }

  struct Reduction {
    Op op;
    DType t;
    std::vector<bool> reduced;  // per input dim
  };

  Value* identity(Op op, DType t) { return literal_scalar(reduction_identity(op, t)); }

  Value* combine(Op op, DType t, Value* acc, Value* v) {
    const bool fl = is_floating(t);
    llvm::IRBuilderBase::FastMathFlagGuard guard(b);
    llvm::FastMathFlags fmf;
    fmf.setAllowReassoc();  // reductions may be reordered (vectorised)
    b.setFastMathFlags(fmf);
    switch (op) {
      case Op::reduce_sum:
        if (!fl) return b.CreateAdd(acc, v);
        return b.CreateFAdd(acc, v);
      case Op::reduce_prod:
        if (!fl) return b.CreateMul(acc, v);
        return b.CreateFMul(acc, v);
      case Op::reduce_max: return minmax(t, acc, v, true);
      case Op::reduce_min: return minmax(t, acc, v, false);
      default: throw InternalError(std::string(op_name(op)) + " is not a reduction an emitted loop combines");
    }
  }

  std::pair<std::int64_t, std::int64_t> emit_reduce(Value* begin, Value* end) {
    const Node& root = *step_.node;
    const NodeRef& x = root.in[0];
    const Shape& xs = x->shape();
    std::vector<bool> reduced(xs.size(), false);
    for (auto a : reduced_axes(root)) reduced[a] = true;
    const bool arg = root.op == Op::argmax || root.op == Op::argmin;
    int last_reduced = -1;
    for (int d = 0; d < int(xs.size()); ++d)
      if (reduced[d]) last_reduced = d;
    const bool column = last_reduced >= 0 && last_reduced < int(xs.size()) - 1;
    if (column) return emit_column_reduce(begin, end, reduced, last_reduced);
    return emit_row_reduce(begin, end, reduced, arg);
  }

  // Loops over the reduced dims (in order), calling body with the full input index.
  void reduce_loops(const Shape& xs, const std::vector<bool>& reduced, Index idx, size_t d,
                    const std::function<void(const Index&)>& body) {
    while (d < xs.size() && !reduced[d]) ++d;
    if (d == xs.size()) {
      body(idx);
      return;
    }
    loop(i64c(0), i64c(xs[d]), [&](Value* i) {
      Index next = idx;
      next[d] = i;
      reduce_loops(xs, reduced, next, d + 1, body);
    });
  }

  std::pair<std::int64_t, std::int64_t> emit_row_reduce(Value* begin, Value* end, const std::vector<bool>& reduced,
                                                        bool arg) {
    const Node& root = *step_.node;
    const NodeRef& x = root.in[0];
    const Shape& xs = x->shape();
    const DType xt = x->dtype();
    const Shape& os = root.shape();
    const std::int64_t n_out = numel(os);
    std::int64_t per_out = 1;
    for (size_t d = 0; d < xs.size(); ++d)
      if (reduced[d]) per_out *= xs[d];
    llvm::Function* f = b.GetInsertBlock()->getParent();
    llvm::IRBuilder<> entry(&f->getEntryBlock(), f->getEntryBlock().begin());
    llvm::AllocaInst* acc = entry.CreateAlloca(reg_type(xt));
    llvm::AllocaInst* best = arg ? entry.CreateAlloca(b.getInt64Ty()) : nullptr;
    const bool is_max = root.op == Op::argmax;
    loop(begin, end, [&](Value* o) {
      Index oidx = unflatten(o, os);
      Index idx(xs.size(), nullptr);
      for (size_t d = 0, k = 0; d < xs.size(); ++d)
        if (!reduced[d]) idx[d] = oidx[k++];
      guarded([&] {
      // argmax / argmin in two passes: the extreme value (max / min,
      // NaN-propagating: a reduction the vectoriser takes), then the first
      // index holding it (a NaN, when it is NaN), leaving at the first. One
      // pass carrying value and index through compares and selects ran
      // about 25 cycles an element (a 4096^2 argmax took 44 ms, max 0.8).
      const Op extreme = arg ? (is_max ? Op::reduce_max : Op::reduce_min) : root.op;
      b.CreateStore(identity(extreme, xt), acc);
      reduce_loops(xs, reduced, idx, 0, [&](const Index& full) {
        memo_.clear();
        Value* v = value(x, full);
        b.CreateStore(combine(extreme, xt, b.CreateLoad(reg_type(xt), acc), v), acc);
      });
      if (!arg) {
        store(root.dtype(), o, b.CreateLoad(reg_type(xt), acc));
        return;
      }
      Value* m = b.CreateLoad(reg_type(xt), acc);
      const auto dim = std::size_t(root.attr<attr::ArgReduce>().dimension);
      b.CreateStore(i64c(0), best);
      // Chunks of kFindChunk elements tested together (one branch, the
      // compares vectorised), then a scalar scan from the chunk that hit
      // (or the tail).
      auto hit_at = [&](Value* j) {
        Index full = idx;
        full[dim] = j;
        memo_.clear();
        Value* v = value(x, full);
        return is_floating(xt) ? b.CreateSelect(b.CreateFCmpUNO(m, m), b.CreateFCmpUNO(v, v), b.CreateFCmpOEQ(v, m))
                               : compare(Op::eq, xt, v, m);
      };
      const std::int64_t len = xs[dim], chunks = len / kFindChunk;
      llvm::BasicBlock* pre = b.GetInsertBlock();
      auto* chunk_header = llvm::BasicBlock::Create(ctx_, "find_chunk", f);
      auto* chunk_body = llvm::BasicBlock::Create(ctx_, "find_chunk_body", f);
      auto* scan_pre = llvm::BasicBlock::Create(ctx_, "find_scan_pre", f);
      auto* header = llvm::BasicBlock::Create(ctx_, "find", f);
      auto* body = llvm::BasicBlock::Create(ctx_, "find_body", f);
      auto* found = llvm::BasicBlock::Create(ctx_, "found", f);
      auto* done = llvm::BasicBlock::Create(ctx_, "find_done", f);
      b.CreateBr(chunk_header);
      b.SetInsertPoint(chunk_header);
      llvm::PHINode* c = b.CreatePHI(b.getInt64Ty(), 2);
      c->addIncoming(i64c(0), pre);
      b.CreateCondBr(b.CreateICmpSLT(c, i64c(chunks)), chunk_body, scan_pre);
      b.SetInsertPoint(chunk_body);
      Value* base = b.CreateMul(c, i64c(kFindChunk), "", true, true);
      Value* any = b.getFalse();
      for (std::int64_t q = 0; q < kFindChunk; ++q) any = b.CreateOr(any, hit_at(b.CreateAdd(base, i64c(q), "", true, true)));
      c->addIncoming(b.CreateAdd(c, i64c(1), "", true, true), chunk_body);
      b.CreateCondBr(any, scan_pre, chunk_header);
      b.SetInsertPoint(scan_pre);
      llvm::PHINode* start = b.CreatePHI(b.getInt64Ty(), 2);
      start->addIncoming(i64c(chunks * kFindChunk), chunk_header);
      start->addIncoming(base, chunk_body);
      b.CreateBr(header);
      b.SetInsertPoint(header);
      llvm::PHINode* i = b.CreatePHI(b.getInt64Ty(), 2);
      i->addIncoming(start, scan_pre);
      b.CreateCondBr(b.CreateICmpSLT(i, i64c(len)), body, done);
      b.SetInsertPoint(body);
      Value* hit = hit_at(i);
      i->addIncoming(b.CreateAdd(i, i64c(1), "", true, true), body);
      b.CreateCondBr(hit, found, header);
      b.SetInsertPoint(found);
      b.CreateStore(i, best);
      b.CreateBr(done);
      b.SetInsertPoint(done);
      memo_.clear();
      store(root.dtype(), o, convert_value(b.CreateLoad(b.getInt64Ty(), best), DType::int64, root.dtype()));
      });
    });
    return {n_out, per_out};
  }

  std::pair<std::int64_t, std::int64_t> emit_column_reduce(Value* begin, Value* end, const std::vector<bool>& reduced,
                                                           int last_reduced) {
    const Node& root = *step_.node;
    const NodeRef& x = root.in[0];
    const Shape& xs = x->shape();
    const DType xt = x->dtype();
    const bool arg = root.op == Op::argmax || root.op == Op::argmin;
    // Output = (kept dims before the last reduced one) x (the tail after it).
    Shape outer_shape, tail_shape;
    for (int d = 0; d < int(xs.size()); ++d) {
      if (reduced[d]) continue;
      (d < last_reduced ? outer_shape : tail_shape).push_back(xs[d]);
    }
    const std::int64_t tail = numel(tail_shape);
    const std::int64_t block = std::min(tail, kColumnBlock);
    const std::int64_t nb = ceil_div(tail, block);
    std::int64_t per_item = block;
    for (size_t d = 0; d < xs.size(); ++d)
      if (reduced[d]) per_item *= xs[d];
    loop(begin, end, [&](Value* item) {
      Value* ob = b.CreateUDiv(item, i64c(nb));
      Value* t0 = b.CreateMul(b.CreateURem(item, i64c(nb)), i64c(block));
      Value* t1 = b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b.CreateAdd(t0, i64c(block)), i64c(tail));
      Value* out_base = b.CreateMul(ob, i64c(tail));
      guarded([&] {
      if (arg) return column_argreduce(reduced, ob, t0, t1, out_base);
      loop(t0, t1, [&](Value* t) { store(root.dtype(), b.CreateAdd(out_base, t), identity(root.op, xt)); });
      Index oidx = unflatten(ob, outer_shape);
      Index idx(xs.size(), nullptr);
      for (int d = 0, k = 0; d < last_reduced; ++d)
        if (!reduced[d]) idx[d] = oidx[k++];
      reduce_loops(xs, reduced, idx, 0, [&](const Index& partial) {
        loop(t0, t1, [&](Value* t) {
          Index full = partial;
          Index tidx = unflatten(t, tail_shape);
          for (int d = last_reduced + 1, k = 0; d < int(xs.size()); ++d) full[d] = tidx[k++];
          memo_.clear();
          Value* v = value(x, full);
          llvm::Type* mt = mem_type(xt);
          Value* p = b.CreateInBoundsGEP(mt, out_, b.CreateAdd(out_base, t));
          Value* a = b.CreateLoad(mt, p);
          if (xt == DType::bool_) a = b.CreateICmpNE(a, b.getInt8(0));
          Value* r = combine(root.op, xt, a, v);
          if (xt == DType::bool_) r = b.CreateZExt(r, mt);
          if (!skip_stores_) b.CreateStore(r, p);
        });
      });
      });
    });
    return {numel(outer_shape) * nb, per_item};
  }

  // argmax / argmin over a dim that is not the last: per column of the block
  // [t0, t1), the best value so far and its index in buffers of the block
  // (kColumnBlock), updated row by row (each row a vector loop over the
  // columns), taking a value that beats the best (strictly: the first of
  // equals stays), a NaN once; then the indices stored.
  void column_argreduce(const std::vector<bool>& reduced, Value* ob, Value* t0, Value* t1, Value* out_base) {
    const Node& root = *step_.node;
    const NodeRef& x = root.in[0];
    const Shape& xs = x->shape();
    const DType xt = x->dtype();
    const bool is_max = root.op == Op::argmax;
    const auto dim = std::size_t(root.attr<attr::ArgReduce>().dimension);
    Shape outer_shape, tail_shape;
    for (std::size_t d = 0; d < xs.size(); ++d)
      if (!reduced[d]) (d < dim ? outer_shape : tail_shape).push_back(xs[d]);
    llvm::Function* f = b.GetInsertBlock()->getParent();
    llvm::IRBuilder<> entry(&f->getEntryBlock(), f->getEntryBlock().begin());
    const std::int64_t block = std::min(numel(tail_shape), kColumnBlock);
    llvm::AllocaInst* vals = entry.CreateAlloca(reg_type(xt), i64c(block));
    llvm::AllocaInst* where = entry.CreateAlloca(b.getInt64Ty(), i64c(block));
    Value* id = identity(is_max ? Op::reduce_max : Op::reduce_min, xt);
    loop(t0, t1, [&](Value* t) {
      Value* k = b.CreateSub(t, t0);
      b.CreateStore(id, b.CreateInBoundsGEP(reg_type(xt), vals, k));
      b.CreateStore(i64c(0), b.CreateInBoundsGEP(b.getInt64Ty(), where, k));
    });
    Index oidx = unflatten(ob, outer_shape);
    Index idx(xs.size(), nullptr);
    for (std::size_t d = 0, k = 0; d < dim; ++d)
      if (!reduced[d]) idx[d] = oidx[k++];
    loop(i64c(0), i64c(xs[dim]), [&](Value* r) {
      loop(t0, t1, [&](Value* t) {
        Index full = idx;
        full[dim] = r;
        Index tidx = unflatten(t, tail_shape);
        for (std::size_t d = dim + 1, k = 0; d < xs.size(); ++d) full[d] = tidx[k++];
        memo_.clear();
        Value* v = value(x, full);
        Value* k = b.CreateSub(t, t0);
        Value* pv = b.CreateInBoundsGEP(reg_type(xt), vals, k);
        Value* pi = b.CreateInBoundsGEP(b.getInt64Ty(), where, k);
        Value* a = b.CreateLoad(reg_type(xt), pv);
        Value* take;
        if (is_floating(xt)) {
          Value* better = is_max ? b.CreateFCmpOGT(v, a) : b.CreateFCmpOLT(v, a);
          take = b.CreateAnd(b.CreateNot(b.CreateFCmpUNO(a, a)), b.CreateOr(b.CreateFCmpUNO(v, v), better));
        } else {
          take = compare(is_max ? Op::gt : Op::lt, xt, v, a);
        }
        b.CreateStore(b.CreateSelect(take, v, a), pv);
        b.CreateStore(b.CreateSelect(take, r, b.CreateLoad(b.getInt64Ty(), pi)), pi);
      });
    });
    loop(t0, t1, [&](Value* t) {
      Value* w = b.CreateLoad(b.getInt64Ty(), b.CreateInBoundsGEP(b.getInt64Ty(), where, b.CreateSub(t, t0)));
      store(root.dtype(), b.CreateAdd(out_base, t), convert_value(w, DType::int64, root.dtype()));
    });
  }

  const Step& step_;
  llvm::Module& m_;
  std::unordered_set<const Node*> leaves_;
  std::unordered_map<const Node*, Value*> base_;
  Value* out_ = nullptr;
  int alias_read_ = -1;
  bool stream_ = false;
  bool has_f32_trig_ = false;
  bool scalar_loops_ = false;  // loops the vectoriser leaves alone (guarded's rare path)
  bool skip_stores_ = false;   // guarded's first look, where it must not write
  std::map<std::pair<const Node*, Index>, Value*> memo_;
};

// The kernel shape (items, work) without building IR: what emit_* return.
std::pair<std::int64_t, std::int64_t> kernel_shape(const Step& step) {
  const Node& root = *step.node;
  if (numel(root.shape()) == 0) return {0, 1};  // an empty result: nothing to compute
  if (step.kind == StepKind::Loop) {
    const Shape& s = root.shape();
    if (s.empty()) return {1, 1};
    const std::int64_t last = s.back(), block = std::min(last, kRowBlock);
    return {numel(s) / last * ceil_div(last, block), block};
  }
  const Shape& xs = root.in[0]->shape();
  std::vector<bool> reduced(xs.size(), false);
  for (auto a : reduced_axes(root)) reduced[a] = true;
  int last_reduced = -1;
  std::int64_t per = 1;
  for (int d = 0; d < int(xs.size()); ++d)
    if (reduced[d]) last_reduced = d, per *= xs[d];
  if (last_reduced >= 0 && last_reduced < int(xs.size()) - 1) {
    std::int64_t outer = 1, tail = 1;
    for (int d = 0; d < int(xs.size()); ++d)
      if (!reduced[d]) (d < last_reduced ? outer : tail) *= xs[d];
    const std::int64_t block = std::min(tail, kColumnBlock);
    return {outer * ceil_div(tail, block), per * block};
  }
  return {numel(root.shape()), per};
}

}  // namespace

std::vector<bool> aligned_reads(const Step& step) {
  std::vector<bool> aligned(step.reads.size(), false);
  if (step.kind != StepKind::Loop) return aligned;
  const Node& root = *step.node;
  std::unordered_map<const Node*, std::size_t> read_at;
  for (std::size_t i = 0; i < step.reads.size(); ++i) read_at.emplace(step.reads[i].get(), i);
  std::vector<bool> misaligned(step.reads.size(), false);
  // (node, reached along an aligned path), each pair once; an explicit stack.
  std::set<std::pair<const Node*, bool>> seen;
  std::vector<std::pair<const Node*, bool>> stack{{&root, true}};
  while (!stack.empty()) {
    auto [n, ok] = stack.back();
    stack.pop_back();
    if (!seen.insert({n, ok}).second) continue;
    if (n != &root) {
      auto it = read_at.find(n);
      if (it != read_at.end()) {
        if (!ok || n->shape() != root.shape() || dtype_size(n->dtype()) != dtype_size(root.dtype()))
          misaligned[it->second] = true;
        continue;
      }
    }
    const bool through = ok && is_elementwise(n->op) && n->shape() == root.shape();
    for (auto& x : n->in) stack.push_back({x.get(), through});
  }
  for (std::size_t i = 0; i < aligned.size(); ++i) aligned[i] = !misaligned[i];
  return aligned;
}

Kernel compile_kernel(const Step& step, int alias_read, bool stream) {
  TESSEL_CHECK_INTERNAL(step.kind == StepKind::Loop || step.kind == StepKind::Reduce);
  TESSEL_CHECK_INTERNAL(alias_read < 0 || (step.kind == StepKind::Loop && aligned_reads(step).at(std::size_t(alias_read))),
                        "a kernel may write over an aligned read only");
  Kernel k;
  // Exact structure and bits of the kernel's expression (tessel/core/key.hpp).
  k.key = (step.kind == StepKind::Loop ? "L" : "R") + fingerprint(step.node, step.reads).bytes();
  if (alias_read >= 0) k.key.append(1, '@').append(std::to_string(alias_read));
  TESSEL_CHECK_INTERNAL(!stream || (alias_read < 0 && step.kind == StepKind::Loop), "a streaming kernel is a Loop's, not in place");
  if (stream) k.key.append("#stream");
  auto [items, work] = kernel_shape(step);
  k.items = items;
  k.work_per_item = work;
  k.code = Jit::get().cached(k.key, [&] {
    // Each module has a JITDylib of its own: one function name serves every
    // kernel (the module's name only names dumps).
    static std::atomic<int> counter{0};
    const std::string name = "tessel_kernel";
    ModuleSource src;
    src.context = std::make_unique<llvm::LLVMContext>();
    src.module = Jit::get().new_module(name + "_" + std::to_string(counter++), *src.context);
    Emitter e(step, *src.context, *src.module, alias_read, stream);
    e.build(name);
    src.symbols = {name};
    return src;
  });
  k.fn = reinterpret_cast<KernelFn>(k.code->symbols.at(0));
  return k;
}

}  // namespace tessel::codegen
