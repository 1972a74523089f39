#!/usr/bin/env python3
"""Writes bench/data/grammar_schemas.jsonl: the structured-output benchmark's schema set.

Hand-written schemas in the shapes real clients send (API payloads, tool arguments, nested
configs, recursive trees, enums, patterns, formats, large anyOfs), then seeded compositions of
the same building blocks, so the set is large, varied and reproducible. Run from anywhere:
    python3 bench/data/make_grammar_schemas.py
"""
import json
import os
import random

S = {"type": "string"}
I = {"type": "integer"}
N = {"type": "number"}
B = {"type": "boolean"}


def obj(props, required=None, extra=False):
    o = {"type": "object", "properties": props,
         "required": list(props) if required is None else required}
    if extra is not None:
        o["additionalProperties"] = extra
    return o


def arr(items, lo=None, hi=None):
    a = {"type": "array", "items": items}
    if lo is not None:
        a["minItems"] = lo
    if hi is not None:
        a["maxItems"] = hi
    return a


HAND = {
    "weather_args": obj({"location": S, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}),
    "search_args": obj({"query": S, "max_results": {"type": "integer", "minimum": 1, "maximum": 50}}, ["query"]),
    "calendar_event": obj({"title": S, "start": {"type": "string", "format": "date-time"},
                           "end": {"type": "string", "format": "date-time"},
                           "attendees": arr({"type": "string", "format": "email"}, 0, 20),
                           "location": {"type": ["string", "null"]}}),
    "user_profile": obj({"id": {"type": "string", "format": "uuid"}, "name": S, "age": {"type": "integer", "minimum": 0, "maximum": 130},
                         "email": {"type": "string", "format": "email"}, "verified": B}, ["id", "name"]),
    "invoice": obj({"invoice_id": {"type": "string", "pattern": "^INV-[0-9]{6}$"}, "date": {"type": "string", "format": "date"},
                    "currency": {"enum": ["USD", "EUR", "CNY", "JPY"]},
                    "lines": arr(obj({"sku": S, "qty": {"type": "integer", "minimum": 1}, "unit_price": {"type": "number", "minimum": 0}}), 1),
                    "total": {"type": "number", "minimum": 0}}),
    "sentiment": obj({"label": {"enum": ["positive", "negative", "neutral"]}, "confidence": {"type": "number", "minimum": 0, "maximum": 1}}),
    "ner": obj({"entities": arr(obj({"text": S, "type": {"enum": ["PERSON", "ORG", "LOC", "DATE", "MISC"]},
                                     "start": {"type": "integer", "minimum": 0}, "end": {"type": "integer", "minimum": 0}}))}),
    "classification_multi": obj({"labels": arr({"enum": ["bug", "feature", "question", "docs", "security"]}, 1, 3),
                                 "priority": {"type": "integer", "minimum": 1, "maximum": 5}}),
    "address": obj({"street": S, "city": S, "postal_code": {"type": "string", "pattern": "^[0-9]{5}(-[0-9]{4})?$"},
                    "country": {"type": "string", "minLength": 2, "maxLength": 2}}, ["street", "city", "country"]),
    "tree": {"$defs": {"node": {"type": "object", "properties": {"name": S, "children": arr({"$ref": "#/$defs/node"})},
                                "required": ["name", "children"], "additionalProperties": False}}, "$ref": "#/$defs/node"},
    "linked_list": {"$defs": {"item": {"type": "object", "properties": {"value": I, "next": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/item"}]}},
                                       "required": ["value", "next"], "additionalProperties": False}}, "$ref": "#/$defs/item"},
    "json_expr": {"$defs": {"expr": {"anyOf": [
        {"type": "object", "properties": {"op": {"enum": ["+", "-", "*", "/"]}, "args": arr({"$ref": "#/$defs/expr"}, 2, 2)},
         "required": ["op", "args"], "additionalProperties": False},
        {"type": "number"}]}}, "$ref": "#/$defs/expr"},
    "k8s_container": obj({"name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"}, "image": S,
                          "ports": arr(obj({"containerPort": {"type": "integer", "minimum": 1, "maximum": 65535},
                                            "protocol": {"enum": ["TCP", "UDP", "SCTP"]}}, ["containerPort"])),
                          "env": arr(obj({"name": S, "value": S})),
                          "resources": obj({"limits": obj({"cpu": S, "memory": S}, []), "requests": obj({"cpu": S, "memory": S}, [])}, [])},
                         ["name", "image"]),
    "github_issue": obj({"title": S, "body": S, "labels": arr(S, 0, 10), "assignees": arr(S, 0, 5),
                         "milestone": {"type": ["integer", "null"]}, "state": {"enum": ["open", "closed"]}}, ["title"]),
    "sql_query": obj({"table": {"enum": ["users", "orders", "products", "events"]},
                      "columns": arr(S, 1), "where": arr(obj({"column": S, "op": {"enum": ["=", "!=", "<", ">", "<=", ">=", "like"]},
                                                             "value": {"type": ["string", "number", "boolean", "null"]}})),
                      "limit": {"type": "integer", "minimum": 1, "maximum": 1000}}, ["table", "columns"]),
    "chart_spec": obj({"type": {"enum": ["bar", "line", "pie", "scatter"]}, "title": S,
                       "series": arr(obj({"name": S, "data": arr(N)}), 1, 8), "x_axis": obj({"label": S, "values": arr(S)})}),
    "recipe": obj({"name": S, "servings": {"type": "integer", "minimum": 1, "maximum": 24},
                   "ingredients": arr(obj({"item": S, "amount": N, "unit": {"enum": ["g", "kg", "ml", "l", "tsp", "tbsp", "cup", "piece"]}})),
                   "steps": arr(S, 1), "vegetarian": B}),
    "movie": obj({"title": S, "year": {"type": "integer", "minimum": 1888, "maximum": 2030}, "genres": arr(S),
                  "rating": {"type": "number", "minimum": 0, "maximum": 10}, "director": S}),
    "anyof_shapes": {"anyOf": [obj({"kind": {"const": "circle"}, "radius": N}), obj({"kind": {"const": "square"}, "side": N}),
                               obj({"kind": {"const": "rect"}, "w": N, "h": N}), obj({"kind": {"const": "polygon"}, "points": arr(arr(N, 2, 2), 3)})]},
    "oneof_payment": {"oneOf": [obj({"method": {"const": "card"}, "last4": {"type": "string", "pattern": "^[0-9]{4}$"}}),
                                obj({"method": {"const": "bank"}, "iban": {"type": "string", "pattern": "^[A-Z]{2}[0-9]{2}[A-Z0-9]{10,30}$"}}),
                                obj({"method": {"const": "wallet"}, "provider": {"enum": ["alipay", "wechat", "paypal"]}})]},
    "allof_employee": {"allOf": [obj({"name": S, "email": {"type": "string", "format": "email"}}),
                                 {"properties": {"department": {"enum": ["eng", "sales", "ops"]}, "level": {"type": "integer", "minimum": 1, "maximum": 10}},
                                  "required": ["department"]}]},
    "network_device": obj({"hostname": {"type": "string", "pattern": "^[a-z][a-z0-9-]{0,30}$"}, "ipv4": {"type": "string", "format": "ipv4"},
                           "ipv6": {"type": "string", "format": "ipv6"}, "mac": {"type": "string", "pattern": "^([0-9a-f]{2}:){5}[0-9a-f]{2}$"},
                           "vlan": {"type": "integer", "minimum": 1, "maximum": 4094}}, ["hostname", "ipv4"]),
    "webhook": obj({"url": {"type": "string", "format": "uri"}, "events": arr({"enum": ["push", "pull_request", "issue", "release"]}, 1),
                    "secret": {"type": "string", "minLength": 16, "maxLength": 64}, "active": B}),
    "log_line": obj({"ts": {"type": "string", "format": "date-time"}, "level": {"enum": ["debug", "info", "warn", "error"]},
                     "msg": S, "fields": {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}}}, ["ts", "level", "msg"]),
    "translation": obj({"source_lang": {"type": "string", "pattern": "^[a-z]{2}$"}, "target_lang": {"type": "string", "pattern": "^[a-z]{2}$"},
                        "text": S, "alternatives": arr(S, 0, 3)}),
    "math_answer": obj({"reasoning_steps": arr(S, 1, 10), "final_answer": {"type": "integer"}}),
    "yes_no": obj({"answer": {"enum": ["yes", "no"]}, "explanation": {"type": "string", "maxLength": 200}}),
    "tuple_point": {"type": "array", "prefixItems": [N, N, {"type": "string", "enum": ["m", "ft"]}], "items": False},
    "nullable_fields": obj({"a": {"type": "string", "nullable": True}, "b": {"type": ["integer", "null"]}, "c": {"anyOf": [B, {"type": "null"}]}}),
    "open_metadata": {"type": "object", "properties": {"id": I}, "required": ["id"], "additionalProperties": True},
    "any_object": {"type": "object"},
    "empty_schema": {},
    "string_lengths": obj({"short": {"type": "string", "maxLength": 5}, "code": {"type": "string", "minLength": 6, "maxLength": 6},
                           "long": {"type": "string", "minLength": 10, "maxLength": 300}}),
    "int_ranges": obj({"small": {"type": "integer", "minimum": -10, "maximum": 10}, "port": {"type": "integer", "minimum": 1024, "maximum": 49151},
                       "year": {"type": "integer", "exclusiveMinimum": 1999, "exclusiveMaximum": 2100}, "int32": {"type": "integer", "format": "int32"}}),
    "number_ranges": obj({"prob": {"type": "number", "minimum": 0, "maximum": 1}, "temp": {"type": "number", "minimum": -273, "maximum": 1000},
                          "positive": {"type": "number", "exclusiveMinimum": 0}}),
    "deep_config": obj({"server": obj({"host": S, "port": I, "tls": obj({"enabled": B, "cert": S, "key": S}, ["enabled"])}),
                        "database": obj({"url": {"type": "string", "format": "uri"}, "pool": obj({"min": I, "max": I})}),
                        "logging": obj({"level": {"enum": ["debug", "info", "warn", "error"]}, "outputs": arr({"enum": ["stdout", "file", "syslog"]})}),
                        "features": {"type": "object", "additionalProperties": B}}),
    "many_optional": obj({f"field_{i}": [S, I, B, N][i % 4] for i in range(24)}, ["field_0", "field_12"]),
    "wide_required": obj({f"col_{i}": [S, I, B][i % 3] for i in range(40)}),
    "large_enum": obj({"country": {"enum": [f"C{i:03d}" for i in range(250)]}, "city": S}),
    "large_anyof": {"anyOf": [obj({"type": {"const": f"event_{i}"}, "payload": obj({f"k{j}": [S, I, B][(i + j) % 3] for j in range(i % 4 + 1)})}) for i in range(30)]},
    "function_call": obj({"name": {"enum": ["get_weather", "search", "send_email", "create_event", "run_code"]},
                          "arguments": {"type": "object", "additionalProperties": True}}),
    "send_email_args": obj({"to": arr({"type": "string", "format": "email"}, 1, 10), "cc": arr({"type": "string", "format": "email"}),
                            "subject": {"type": "string", "maxLength": 120}, "body": S, "priority": {"enum": ["low", "normal", "high"]}}, ["to", "subject", "body"]),
    "run_code_args": obj({"language": {"enum": ["python", "javascript", "bash", "sql"]}, "code": S, "timeout_s": {"type": "integer", "minimum": 1, "maximum": 600}}),
    "product_catalog": obj({"products": arr(obj({"id": {"type": "string", "pattern": "^P[0-9]{5}$"}, "name": S,
                                                  "price": {"type": "number", "minimum": 0}, "tags": arr(S, 0, 8),
                                                  "dimensions": obj({"w": N, "h": N, "d": N}), "in_stock": B}))}),
    "time_slots": obj({"day": {"type": "string", "format": "date"}, "slots": arr(obj({"start": {"type": "string", "format": "time"},
                                                                                       "end": {"type": "string", "format": "time"}}), 1, 12)}),
    "matrix": obj({"rows": {"type": "integer", "minimum": 1, "maximum": 8}, "data": arr(arr(N, 1, 8), 1, 8)}),
    "graph": obj({"nodes": arr(obj({"id": I, "label": S})), "edges": arr({"type": "array", "prefixItems": [I, I], "items": False})}),
    "chat_turn": obj({"role": {"enum": ["user", "assistant", "system"]}, "content": S,
                      "tool_calls": arr(obj({"id": S, "name": S, "arguments": S}))}, ["role", "content"]),
    "rating_card": obj({"scores": obj({"clarity": {"type": "integer", "minimum": 1, "maximum": 5}, "accuracy": {"type": "integer", "minimum": 1, "maximum": 5},
                                       "style": {"type": "integer", "minimum": 1, "maximum": 5}}), "comment": {"type": "string", "maxLength": 500}}),
    "uri_list": arr({"type": "string", "format": "uri"}, 1, 5),
    "string_pattern_phone": obj({"phone": {"type": "string", "pattern": "^\\+[1-9][0-9]{7,14}$"}}),
    "semver": obj({"version": {"type": "string", "pattern": "^(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$"}}),
    "unsupported_unique": obj({"tags": {"type": "array", "items": S, "uniqueItems": True}}),
    "unsupported_not": {"not": {"type": "null"}},
    "unsupported_multiple": obj({"n": {"type": "integer", "multipleOf": 5}}),
}

BLOCKS = [
    S, I, N, B,
    {"type": "string", "maxLength": 40},
    {"type": "string", "format": "date"},
    {"type": "string", "format": "email"},
    {"type": "string", "format": "uuid"},
    {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{3}$"},
    {"type": "integer", "minimum": 0, "maximum": 100},
    {"type": "integer", "minimum": 1},
    {"type": "number", "minimum": 0, "maximum": 1},
    {"enum": ["low", "medium", "high"]},
    {"enum": ["draft", "review", "published", "archived"]},
    {"type": ["string", "null"]},
    arr(S, 0, 5),
    arr(I),
    {"anyOf": [S, I]},
]
NAMES = ["id", "name", "title", "status", "count", "score", "owner", "created", "updated", "email", "code", "level",
         "notes", "tags", "items", "value", "ratio", "kind", "region", "priority", "summary", "author", "version", "source"]


def compose(rng, depth):
    props = {}
    for name in rng.sample(NAMES, rng.randint(2, 8)):
        r = rng.random()
        if depth < 2 and r < 0.15:
            props[name] = compose(rng, depth + 1)
        elif depth < 2 and r < 0.25:
            props[name] = arr(compose(rng, depth + 1), 0, rng.choice([None, 3, 10]))
        else:
            props[name] = rng.choice(BLOCKS)
    names = list(props)
    required = [n for n in names if rng.random() < 0.6]
    return obj(props, required, rng.choice([False, False, False, None]))


def main():
    rng = random.Random(20261205)
    out = [{"name": k, "schema": v} for k, v in HAND.items()]
    for i in range(210 - len(out)):
        out.append({"name": f"composed_{i:03d}", "schema": compose(rng, 0)})
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "grammar_schemas.jsonl")
    with open(path, "w") as f:
        for entry in out:
            f.write(json.dumps(entry, ensure_ascii=False) + "\n")
    print(f"{len(out)} schemas -> {path}")


if __name__ == "__main__":
    main()
