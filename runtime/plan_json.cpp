#include "runtime/plan_json.h"

#include <flatbuffers/idl.h>

#include "runtime/plan_generated.h"

namespace kt {

extern const char kPlanSchemaText[];  // runtime/plan.fbs (plan_schema_text.cpp, generated)

namespace {

Result<flatbuffers::Parser*> schema_parser(flatbuffers::Parser& p) {
  p.opts.strict_json = true;
  p.opts.output_default_scalars_in_json = true;
  p.opts.indent_step = 1;
  if (!p.Parse(kPlanSchemaText)) return err("plan schema: ", p.error_);
  return &p;
}

}  // namespace

Result<std::string> plan_to_json(std::span<const uint8_t> bytes, const std::string& name) {
  flatbuffers::Parser p;
  KT_TRY(schema_parser(p));
  if (bytes.size() < 4) return err(name, ": not a plan");
  std::string json;
  if (!flatbuffers::GenerateText(p, bytes.data() + 4, &json)) return err(name, ": the plan cannot be written as JSON");
  return json;
}

Result<std::vector<uint8_t>> plan_from_json(const std::string& json, const std::string& name) {
  flatbuffers::Parser p;
  KT_TRY(schema_parser(p));
  if (!p.Parse(json.c_str())) return err(name, ": ", p.error_);
  // The parser's buffer has no size prefix: unpack it and pack it again.
  flatbuffers::Verifier v(p.builder_.GetBufferPointer(), p.builder_.GetSize());
  if (!plan::VerifyPlanBuffer(v)) return err(name, ": the JSON does not describe a plan");
  std::unique_ptr<plan::PlanT> obj(plan::GetPlan(p.builder_.GetBufferPointer())->UnPack());
  flatbuffers::FlatBufferBuilder fb;
  plan::FinishSizePrefixedPlanBuffer(fb, plan::Plan::Pack(fb, obj.get()));
  return std::vector<uint8_t>(fb.GetBufferPointer(), fb.GetBufferPointer() + fb.GetSize());
}

}  // namespace kt
