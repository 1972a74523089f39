// Generation fields of request bodies (dialect/request_options.h).
#include "dialect/request_options.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>

namespace flashserve::dialect {

namespace {

using Json = nlohmann::ordered_json;

// Each reader leaves *out unchanged when the field is absent or null.
class FieldReader {
 public:
  explicit FieldReader(const Json& body) : body_(body) {}

  const std::optional<net::ApiError>& error() const { return error_; }

  const Json* Find(const char* key) {
    if (error_) return nullptr;
    auto it = body_.find(key);
    if (it == body_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  void Bool(const char* key, bool* out) {
    const Json* v = Find(key);
    if (!v) return;
    if (!v->is_boolean()) return Fail(key, std::string("expected a boolean, got ") + JsonTypeName(*v));
    *out = v->get<bool>();
  }

  void Number(const char* key, double lo, double hi, float* out) {
    const Json* v = Find(key);
    if (!v) return;
    if (!v->is_number()) return Fail(key, std::string("expected a number, got ") + JsonTypeName(*v));
    const double x = v->get<double>();
    if (!(x >= lo && x <= hi)) return Fail(key, RangeText(lo, hi));
    *out = static_cast<float>(x);
  }

  // Integers; a float with an integral value (10.0) is accepted.
  bool Integer(const char* key, int64_t lo, int64_t hi, int64_t* out) {
    const Json* v = Find(key);
    if (!v) return false;
    std::optional<int64_t> x = IntegerValue(*v);
    if (!x) {
      Fail(key, std::string("expected an integer, got ") + JsonTypeName(*v));
      return false;
    }
    if (*x < lo || *x > hi) {
      Fail(key, RangeText(static_cast<double>(lo), static_cast<double>(hi)));
      return false;
    }
    *out = *x;
    return true;
  }

  void Fail(const std::string& param, const std::string& what) {
    if (!error_) error_ = net::InvalidRequest(param + ": " + what, param);
  }

  static std::optional<int64_t> IntegerValue(const Json& v) {
    if (v.is_number_integer()) {
      if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
      return v.get<int64_t>();
    }
    if (v.is_number_float()) {
      const double d = v.get<double>();
      if (std::isfinite(d) && std::floor(d) == d && std::fabs(d) < 9.0e15) return static_cast<int64_t>(d);
    }
    return std::nullopt;
  }

 private:
  static std::string RangeText(double lo, double hi) {
    auto fmt = [](double x) {
      std::string s = std::to_string(x);
      s.erase(s.find_last_not_of('0') + 1);
      if (!s.empty() && s.back() == '.') s.pop_back();
      return s;
    };
    return "must be between " + fmt(lo) + " and " + fmt(hi);
  }

  const Json& body_;
  std::optional<net::ApiError> error_;
};

void ReadStop(FieldReader& r, GenerationOptions* out) {
  const Json* v = r.Find("stop");
  if (!v) return;
  std::vector<std::string> stops;
  if (v->is_string()) {
    stops.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    for (const Json& s : *v) {
      if (!s.is_string()) return r.Fail("stop", std::string("expected a string or an array of strings, got an array holding ") + JsonTypeName(s));
      stops.push_back(s.get<std::string>());
    }
  } else {
    return r.Fail("stop", std::string("expected a string or an array of strings, got ") + JsonTypeName(*v));
  }
  if (stops.size() > kMaxStopStrings) return r.Fail("stop", "at most " + std::to_string(kMaxStopStrings) + " stop sequences");
  for (const std::string& s : stops)
    if (s.empty()) return r.Fail("stop", "stop sequences must not be empty");
  out->stop = std::move(stops);
}

void ReadLogitBias(FieldReader& r, int64_t vocab_size, GenerationOptions* out) {
  const Json* v = r.Find("logit_bias");
  if (!v) return;
  if (!v->is_object()) return r.Fail("logit_bias", std::string("expected an object, got ") + JsonTypeName(*v));
  for (auto it = v->begin(); it != v->end(); ++it) {
    const std::string& key = it.key();
    char* end = nullptr;
    const long long id = key.empty() ? -1 : std::strtoll(key.c_str(), &end, 10);
    if (key.empty() || *end != '\0' || id < 0 || id >= vocab_size)
      return r.Fail("logit_bias", "key '" + key + "' is not a token id in [0, " + std::to_string(vocab_size) + ")");
    if (!it->is_number()) return r.Fail("logit_bias", "value of '" + key + "' must be a number");
    const double bias = it->get<double>();
    if (!(bias >= -100 && bias <= 100)) return r.Fail("logit_bias", "value of '" + key + "' must be between -100 and 100");
    out->sampling.logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(bias));
  }
}

void ReadStopTokenIds(FieldReader& r, int64_t vocab_size, GenerationOptions* out) {
  const Json* v = r.Find("stop_token_ids");
  if (!v) return;
  if (!v->is_array()) return r.Fail("stop_token_ids", std::string("expected an array, got ") + JsonTypeName(*v));
  for (const Json& t : *v) {
    std::optional<int64_t> id = FieldReader::IntegerValue(t);
    if (!id || *id < 0 || *id >= vocab_size) return r.Fail("stop_token_ids", "entries must be token ids in [0, " + std::to_string(vocab_size) + ")");
    out->stop_token_ids.push_back(static_cast<int32_t>(*id));
  }
}

void ReadLogprobs(FieldReader& r, Dialect dialect, GenerationOptions* out) {
  protocol::SamplingParams& s = out->sampling;
  if (dialect == Dialect::kChat) {
    r.Bool("logprobs", &s.logprobs);
    int64_t top = 0;
    if (r.Integer("top_logprobs", 0, 20, &top)) {
      if (!s.logprobs && top > 0) return r.Fail("top_logprobs", "logprobs must be true when top_logprobs is set");
      s.top_logprobs = static_cast<int>(top);
    }
    return;
  }
  int64_t top = 0;
  if (r.Integer("logprobs", 0, 5, &top)) {
    s.logprobs = true;
    s.top_logprobs = static_cast<int>(top);
  }
}

}  // namespace

const char* JsonTypeName(const nlohmann::ordered_json& value) {
  switch (value.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::object: return "object";
    case Json::value_t::array: return "array";
    case Json::value_t::string: return "string";
    case Json::value_t::boolean: return "boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "integer";
    case Json::value_t::number_float: return "number";
    default: return "value";
  }
}

std::optional<net::ApiError> ParseJsonBody(const std::string& text, nlohmann::ordered_json* out) {
  try {
    *out = Json::parse(text);
  } catch (const Json::exception& e) {
    std::string what = e.what();
    const size_t pos = what.find("] ");
    if (pos != std::string::npos) what = what.substr(pos + 2);
    return net::InvalidRequest("the request body is not valid JSON: " + what, "", "invalid_json");
  }
  if (!out->is_object())
    return net::InvalidRequest(std::string("the request body must be a JSON object, got ") + JsonTypeName(*out), "", "invalid_json");
  return std::nullopt;
}

std::optional<net::ApiError> ParseGenerationOptions(const nlohmann::ordered_json& body, Dialect dialect,
                                               int64_t vocab_size, GenerationOptions* out) {
  FieldReader r(body);
  const Json* model = r.Find("model");
  if (!model) return net::InvalidRequest("you must provide a model parameter", "model");
  if (!model->is_string()) return net::InvalidRequest(std::string("model: expected a string, got ") + JsonTypeName(*model), "model");
  out->model = model->get<std::string>();
  r.Bool("stream", &out->stream);
  if (const Json* so = r.Find("stream_options")) {
    if (!so->is_object()) {
      r.Fail("stream_options", std::string("expected an object, got ") + JsonTypeName(*so));
    } else if (auto it = so->find("include_usage"); it != so->end() && !it->is_null()) {
      if (!it->is_boolean()) r.Fail("stream_options.include_usage", std::string("expected a boolean, got ") + JsonTypeName(*it));
      else out->include_usage = it->get<bool>();
    }
  }
  if (r.Find("stream_options") != nullptr && !out->stream && !r.error())
    return net::InvalidRequest("stream_options: only allowed when stream is true", "stream_options", "invalid_value");
  int64_t n = 1;
  if (r.Integer("n", 1, kMaxChoices, &n)) out->n = static_cast<int>(n);
  int64_t max_tokens = 0;
  if (r.Integer("max_tokens", 1, INT32_MAX, &max_tokens)) out->max_tokens = max_tokens;
  if (r.Integer("max_completion_tokens", 1, INT32_MAX, &max_tokens)) out->max_tokens = max_tokens;
  protocol::SamplingParams& s = out->sampling;
  r.Number("temperature", 0.0, 2.0, &s.temperature);
  r.Number("top_p", 1e-9, 1.0, &s.top_p);
  r.Number("min_p", 0.0, 1.0, &s.min_p);
  r.Number("presence_penalty", -2.0, 2.0, &s.presence_penalty);
  r.Number("frequency_penalty", -2.0, 2.0, &s.frequency_penalty);
  r.Number("repetition_penalty", 1e-9, 2.0, &s.repetition_penalty);
  int64_t top_k = 0;
  if (r.Integer("top_k", -1, vocab_size, &top_k)) s.top_k = top_k < 0 ? 0 : static_cast<int>(top_k);
  int64_t seed = 0;
  if (r.Integer("seed", INT64_MIN, INT64_MAX, &seed)) {
    s.seed = static_cast<uint64_t>(seed);
    s.has_seed = true;
  }
  ReadLogprobs(r, dialect, out);
  ReadStop(r, out);
  ReadLogitBias(r, vocab_size, out);
  ReadStopTokenIds(r, vocab_size, out);
  r.Bool("ignore_eos", &out->ignore_eos);
  if (const Json* ttl = r.Find("cache_ttl")) {
    const bool ok = ttl->is_string() && !ttl->get<std::string>().empty() && ttl->get<std::string>().size() <= 32 &&
                    ttl->get<std::string>().find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_-") == std::string::npos;
    if (!ok) r.Fail("cache_ttl", "expected a retention class name such as \"agent\" or \"chat\"");
    else out->cache_ttl = ttl->get<std::string>();
  }
  if (const Json* user = r.Find("user")) {
    if (!user->is_string()) r.Fail("user", std::string("expected a string, got ") + JsonTypeName(*user));
    else out->user = user->get<std::string>();
  }
  return r.error();
}

}  // namespace flashserve::dialect
