// The DSML tool-call grammar (grammar/tool_calls.h). The block is written exactly as
// encoding::AppendToolCallsBlock renders one, so the output parser reads it back.
#include "grammar/tool_calls.h"

#include <set>

#include <fmt/format.h>

#include "grammar/json_schema.h"
#include "grammar/regex.h"

namespace flashserve::grammar {
namespace {

using Json = nlohmann::ordered_json;
using base::Error;
using base::ErrorCode;

struct Tags {
  std::string dsml, block, invoke, parameter;
};

bool IsStringSchema(const Json& s) {
  if (!s.is_object()) return false;
  if (s.contains("enum") && s["enum"].is_array() && !s["enum"].empty()) {
    for (const Json& v : s["enum"]) {
      if (!v.is_string()) return false;
    }
    return true;
  }
  if (s.contains("const")) return s["const"].is_string();
  return s.value("type", Json()) == "string";
}

class ToolCallBuilder {
 public:
  ToolCallBuilder(const Json& spec, Tags tags) : spec_(spec), tags_(std::move(tags)) {}

  base::Result<Grammar> Run() {
    const Json& tools = spec_["tools"];
    if (!tools.is_array() || tools.empty()) return Error(ErrorCode::kInvalidArgument, "tool calls need at least one tool");
    std::vector<ExprId> invokes;
    for (size_t i = 0; i < tools.size(); ++i) {
      FS_ASSIGN_OR_RETURN(ExprId e, Invoke(tools[i], fmt::format("tools[{}]", i)));
      invokes.push_back(e);
    }
    const int32_t one = g_.AddRule("invoke");
    g_.Define(one, g_.Alt(std::move(invokes)));
    const ExprId call = g_.Ref(one);
    const ExprId calls = spec_.value("parallel", true) ? g_.Seq({call, g_.Star(g_.Seq({Lit("\n"), call}))}) : call;
    const ExprId block = g_.Seq({Lit("\n\n<"), Lit(tags_.dsml), Lit(tags_.block + ">\n"), calls, Lit("\n</"), Lit(tags_.dsml),
                                 Lit(tags_.block + ">")});
    const int32_t root = g_.AddRule("root");
    const std::string mode = spec_.value("mode", "required");
    if (mode == "required") g_.Define(root, block);
    else if (mode == "auto") g_.Define(root, g_.Seq({g_.Avoid(tags_.dsml), g_.Optional(block)}));
    else return Error(ErrorCode::kInvalidArgument, fmt::format("unknown tool-call mode '{}'", mode));
    g_.set_root(root);
    return std::move(g_);
  }

 private:
  ExprId Lit(const std::string& s) { return g_.Bytes(s); }

  CodepointRanges MarkerStart() const {
    size_t pos = 0;
    const std::optional<uint32_t> cp = DecodeUtf8(tags_.dsml, &pos);
    return cp ? CodepointRanges{{*cp, *cp}} : CodepointRanges{};
  }

  base::Result<ExprId> Invoke(const Json& tool, const std::string& path) {
    if (!tool.is_object() || !tool.contains("name") || !tool["name"].is_string()) {
      return Error(ErrorCode::kInvalidArgument, path + ": a tool needs a name");
    }
    const Json params = tool.value("parameters", Json::object());
    // A forced call follows its tool's schema wherever the schema can be enforced, strict or not.
    const Enforce enforce = tool.value("strict", false)                      ? Enforce::kStrict
                            : spec_.value("mode", "required") == "required" ? Enforce::kWherePossible
                                                                            : Enforce::kNo;
    JsonValues values(&g_, params);
    std::vector<std::pair<ExprId, bool>> members;  // (parameter element, required)
    if (params.is_object() && params.contains("properties") && params["properties"].is_object()) {
      std::set<std::string> required;
      for (const Json& r : params.value("required", Json::array())) {
        if (r.is_string()) required.insert(r.get<std::string>());
      }
      for (const auto& [name, schema] : params["properties"].items()) {
        FS_ASSIGN_OR_RETURN(ExprId value, ParamValue(schema, params, enforce, &values, path + ".parameters.properties." + name));
        members.push_back({g_.Seq({Lit("<"), Lit(tags_.dsml), Lit(tags_.parameter + " name=" + Json(name).dump()), value,
                                   Lit("</"), Lit(tags_.dsml), Lit(tags_.parameter + ">")}),
                           required.count(name) > 0});
      }
    }
    return g_.Seq({Lit("<"), Lit(tags_.dsml), Lit(tags_.invoke + " name=" + Json(tool["name"].get<std::string>()).dump() + ">\n"),
                   InOrder(members), Lit("\n</"), Lit(tags_.dsml), Lit(tags_.invoke + ">")});
  }

  enum class Enforce { kNo, kWherePossible, kStrict };

  // ` string="true">raw text` or ` string="false">JSON`, as the schema types the value; any
  // value of either kind where the schema is not enforced (kWherePossible: where it cannot be).
  base::Result<ExprId> ParamValue(const Json& schema, const Json& params, Enforce enforce, JsonValues* values,
                                  const std::string& path) {
    const auto free = [&] {  // built only when used: it adds the any-value rules
      return g_.Alt({g_.Seq({Lit(" string=\"true\">"), g_.Avoid(tags_.dsml)}),
                     g_.Seq({Lit(" string=\"false\">"), values->AnyValue()})});
    };
    if (enforce == Enforce::kNo) return free();
    if (enforce == Enforce::kWherePossible) {
      ToolCallBuilder trial(spec_, tags_);  // a scratch grammar, so a refusal leaves no rules behind
      JsonValues trial_values(&trial.g_, params);
      if (!trial.SchemaValue(schema, &trial_values, path).ok()) return free();
    }
    return SchemaValue(schema, values, path);
  }

  base::Result<ExprId> SchemaValue(const Json& schema, JsonValues* values, const std::string& path) {
    const ExprId raw_any = g_.Seq({Lit(" string=\"true\">"), g_.Avoid(tags_.dsml)});
    if (!IsStringSchema(schema)) {
      FS_ASSIGN_OR_RETURN(ExprId json, values->Value(schema, path));
      return g_.Seq({Lit(" string=\"false\">"), json});
    }
    if (schema.contains("enum") || schema.contains("const")) {
      std::vector<ExprId> alts;
      for (const Json& v : schema.contains("enum") ? schema["enum"] : Json::array({schema["const"]})) alts.push_back(Lit(v.get<std::string>()));
      return g_.Seq({Lit(" string=\"true\">"), g_.Alt(std::move(alts))});
    }
    if (schema.contains("pattern") || schema.contains("format") || schema.contains("minLength") || schema.contains("maxLength")) {
      // The value is written raw (the decoded string itself). Leaving the marker's first
      // character (｜) out of every character keeps the markup out of the value.
      FS_ASSIGN_OR_RETURN(ExprId text, BoundedStringText(schema, path, false, MarkerStart(), &g_));
      return g_.Seq({Lit(" string=\"true\">"), text});
    }
    return raw_any;
  }

  // Members in order, optional ones skippable, one newline between written members.
  ExprId InOrder(const std::vector<std::pair<ExprId, bool>>& members) {
    ExprId after = g_.Empty();  // once something was written
    ExprId none = g_.Empty();   // nothing written yet
    for (size_t i = members.size(); i-- > 0;) {
      const auto& [m, required] = members[i];
      const int32_t rule = g_.AddRule(fmt::format("p{}", count_++));
      const ExprId write = g_.Seq({Lit("\n"), m});
      g_.Define(rule, g_.Seq({required ? write : g_.Optional(write), after}));
      const ExprId first = g_.Seq({m, after});
      after = g_.Ref(rule);
      none = required ? first : g_.Alt({first, none});
    }
    return none;
  }

  const Json& spec_;
  Tags tags_;
  Grammar g_;
  int count_ = 0;
};

}  // namespace

base::Result<Grammar> ToolCallGrammar(const Json& spec) {
  if (!spec.is_object()) return Error(ErrorCode::kInvalidArgument, "tool-call spec must be an object");
  const Json tags = spec.value("tags", Json::object());
  Tags t{spec.value("dsml", "｜DSML｜"), tags.value("block", "tool_calls"), tags.value("invoke", "invoke"),
         tags.value("parameter", "parameter")};
  return ToolCallBuilder(spec, std::move(t)).Run();
}

}  // namespace flashserve::grammar
