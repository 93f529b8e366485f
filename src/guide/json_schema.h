// JSON Schema -> grammar, for response_format json_schema / json_object and tool-call arguments.
//
// The grammar generates a subset of the instances the schema accepts, never an instance it
// rejects: where a schema is only partly expressible the grammar narrows (an object emits only its
// declared properties, in declared order, required ones always and optional ones optionally; a
// date never names day 29 of February), and what cannot be narrowed safely is refused with a
// sluice::Error naming the keyword and its JSON pointer path.
//
// Supported: type (one or a list), properties, required, additionalProperties (false, or any
// schema when there are no properties), enum, const, items, prefixItems, minItems, maxItems,
// anyOf, oneOf (only when no value can match two alternatives: different types, different
// const/enum values, or objects told apart by a required property with different const/enum
// values), allOf with one schema, $ref to #, #/$defs/NAME and #/definitions/NAME (recursion is
// fine), minLength/maxLength, format date, time, date-time and uuid, uniqueItems false.
// Ignored annotations: title, description, examples, example, default, $schema, $id, $comment,
// deprecated, readOnly, writeOnly, $defs, definitions and x-* extensions. Every other keyword is
// refused, pattern included.
//
// Output shape. Numbers have at most 16 integer digits, 16 fraction digits and a 2-digit exponent
// (doubles stay finite). Whitespace between JSON tokens is nothing, one space, or a newline and up
// to 20 spaces or tabs: room for compact and indented output while a model cannot loop on
// whitespace forever. The root value has no whitespace around it.
//
// Property order is the schema's declared order, so pass the schema as nlohmann::ordered_json;
// a plain nlohmann::json has already sorted its keys.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "guide/grammar.h"

namespace sluice::guide {

// GBNF rules whose names all start with `rule_prefix` ([a-zA-Z0-9_-]*) and whose start rule is
// `<prefix>root`, so several schemas can live in one composite grammar. With an empty prefix the
// text is a complete grammar on its own.
std::string json_schema_gbnf(const nlohmann::ordered_json& schema, std::string_view rule_prefix = "");
std::string json_schema_gbnf(const nlohmann::json& schema, std::string_view rule_prefix = "");
// Any JSON object (response_format json_object).
std::string json_any_object_gbnf(std::string_view rule_prefix = "");

Grammar json_schema_grammar(const nlohmann::ordered_json& schema);
Grammar json_schema_grammar(const nlohmann::json& schema);
Grammar json_any_object_grammar();

}  // namespace sluice::guide
