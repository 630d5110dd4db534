//===- PerfMap.cpp - JIT'd functions for Linux perf -----------------------===//

#include "PerfMap.h"

#include "llvm/ExecutionEngine/JITLink/JITLink.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/ObjectLinkingLayer.h"
#include "llvm/IR/Module.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <unistd.h>

using namespace llvm;

namespace {

/// After each link, writes "<address> <size> <name>" for every named
/// callable symbol the graph defines (JITLink keeps no names for local
/// symbols, so profiled builds give kernels hidden global symbols: see
/// exposeLocalFunctions).
class PerfMapPlugin : public orc::ObjectLinkingLayer::Plugin {
public:
  void modifyPassConfig(orc::MaterializationResponsibility &,
                        jitlink::LinkGraph &,
                        jitlink::PassConfiguration &config) override {
    config.PostFixupPasses.push_back([](jitlink::LinkGraph &g) -> Error {
      static std::mutex mutex;
      std::lock_guard<std::mutex> lock(mutex);
      std::string path = "/tmp/perf-" + std::to_string(getpid()) + ".map";
      FILE *f = std::fopen(path.c_str(), "a");
      if (!f)
        return Error::success(); // profiling aid only
      for (jitlink::Symbol *sym : g.defined_symbols())
        if (sym->isCallable() && sym->hasName() && sym->getSize() > 0)
          std::fprintf(f, "%llx %llx %s\n",
                       (unsigned long long)sym->getAddress().getValue(),
                       (unsigned long long)sym->getSize(),
                       (*sym->getName()).str().c_str());
      std::fclose(f);
      return Error::success();
    });
  }
  Error notifyFailed(orc::MaterializationResponsibility &) override {
    return Error::success();
  }
  Error notifyRemovingResources(orc::JITDylib &, orc::ResourceKey) override {
    return Error::success();
  }
  void notifyTransferringResources(orc::JITDylib &, orc::ResourceKey,
                                   orc::ResourceKey) override {}
};

} // namespace

bool seqc::perfMapRequested() {
  const char *flag = std::getenv("SEQC_PERF_MAP");
  return flag && *flag && std::string(flag) != "0";
}

void seqc::exposeLocalFunctions(Module &module) {
  for (Function &f : module.functions())
    if (f.hasLocalLinkage() && !f.isDeclaration()) {
      f.setLinkage(GlobalValue::ExternalLinkage);
      f.setVisibility(GlobalValue::HiddenVisibility);
    }
}

void seqc::addPerfMapSupport(orc::LLJIT &jit) {
  if (!perfMapRequested())
    return;
  if (auto *layer =
          dyn_cast<orc::ObjectLinkingLayer>(&jit.getObjLinkingLayer()))
    layer->addPlugin(std::make_shared<PerfMapPlugin>());
}
