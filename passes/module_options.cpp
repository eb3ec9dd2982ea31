#include "passes/module_options.h"

#include "mlir/IR/Builders.h"

namespace kt {

mlir::Attribute option(ModuleInterface m, llvm::StringRef key) {
  mlir::DictionaryAttr d = m.getOptionsAttr();
  return d ? d.get(key) : mlir::Attribute();
}

llvm::StringRef option_str(ModuleInterface m, llvm::StringRef key) {
  if (auto s = llvm::dyn_cast_or_null<mlir::StringAttr>(option(m, key))) return s.getValue();
  return "";
}

bool option_bool(ModuleInterface m, llvm::StringRef key) {
  auto b = llvm::dyn_cast_or_null<mlir::BoolAttr>(option(m, key));
  return b && b.getValue();
}

void set_options(ModuleInterface m, llvm::ArrayRef<mlir::NamedAttribute> updates) {
  mlir::NamedAttrList list;
  if (mlir::DictionaryAttr d = m.getOptionsAttr()) list.assign(d.begin(), d.end());
  for (const mlir::NamedAttribute& a : updates) list.set(a.getName(), a.getValue());
  m.setOptionsAttr(list.getDictionary(m->getContext()));
}

void set_option(ModuleInterface m, llvm::StringRef key, mlir::Attribute value) {
  mlir::Builder b(m->getContext());
  set_options(m, {b.getNamedAttr(key, value)});
}

void set_option(ModuleInterface m, llvm::StringRef key, llvm::StringRef value) {
  set_option(m, key, mlir::StringAttr::get(m->getContext(), value));
}

llvm::StringRef op_kind(mlir::Operation* op) { return op->getName().stripDialect(); }

llvm::SmallVector<ModuleInterface> children(ModuleInterface m) {
  llvm::SmallVector<ModuleInterface> out;
  for (mlir::Region& r : m->getRegions())
    for (mlir::Block& b : r)
      for (mlir::Operation& op : b)
        if (auto child = llvm::dyn_cast<ModuleInterface>(&op)) out.push_back(child);
  return out;
}

ModuleInterface parent_module(ModuleInterface m) {
  return llvm::dyn_cast_or_null<ModuleInterface>(m->getParentOp());
}

void walk_modules(mlir::Operation* root, const std::function<void(ModuleInterface)>& fn) {
  root->walk<mlir::WalkOrder::PreOrder>([&](mlir::Operation* op) {
    if (auto m = llvm::dyn_cast<ModuleInterface>(op)) fn(m);
  });
}

bool on_gpu(ModuleInterface m) { return option_str(m, "generate_device").starts_with("cuda:"); }

}  // namespace kt
