// The chat-template interpreter on small templates, one Jinja feature at a
// time: whitespace control, scoping, loops, macros, operators, printing,
// Undefined, filters, tests, Python methods and globals. Expected outputs are
// written by hand from Jinja's semantics and were checked against jinja2 3.1.2
// configured as transformers configures it (ImmutableSandboxedEnvironment,
// trim_blocks, lstrip_blocks, loopcontrols, json.dumps tojson). Where jinja2
// raises, the case gives a part of the error message instead.
#include <gtest/gtest.h>

#include <ctime>
#include <iterator>

#include <nlohmann/json.hpp>

#include "runtime/chat_template.h"

namespace kt {
namespace {

struct Case {
  const char* tpl;
  const char* context;   // JSON object
  const char* expected;  // nullptr: rendering must fail
  const char* error;     // a part of the error message when it fails
};

void check(const Case* cases, size_t n) {
  ChatTemplateOptions opts;
  std::tm t{};
  t.tm_year = 2026 - 1900;
  t.tm_mday = 15;
  opts.now = t;
  for (size_t k = 0; k < n; ++k) {
    const Case& c = cases[k];
    SCOPED_TRACE(c.tpl);
    auto tpl = ChatTemplate::parse(c.tpl, "t");
    Result<std::string> out = tpl.ok() ? tpl->render(nlohmann::ordered_json::parse(c.context), opts)
                                       : Result<std::string>(tpl.error());
    if (c.expected) {
      ASSERT_TRUE(out.ok()) << out.error().message;
      EXPECT_EQ(*out, c.expected);
    } else {
      ASSERT_FALSE(out.ok()) << "rendered: " << *out;
      EXPECT_NE(out.error().message.find(c.error), std::string::npos) << out.error().message;
    }
  }
}


constexpr Case kWhitespace[] = {
    {"  {% if true %}\n  x\n  {% endif %}\n  y",
     "{}", "  x\n  y", nullptr},
    {"a  {%- if true -%}  b  {%- endif -%}  c",
     "{}", "abc", nullptr},
    {"{# comment #}\na\n  {# indented comment #}\nb {#- stripped -#} c",
     "{}", "a\nbc", nullptr},
    {"{% for x in [1,2] -%}\n  {{ x }}\n{%- endfor %}",
     "{}", "12", nullptr},
    {"{% for x in [1,2] %}\n  {{ x }}\n{% endfor %}",
     "{}", "  1\n  2\n", nullptr},
    {"  {%- set a = 1 %}\n  {%+ if a %}p{% endif %}\n  {% if a -%}   \n  q\n  {%- endif %}",
     "{}", "  pq", nullptr},
    {"x {{- ' y ' -}} z",
     "{}", "x y z", nullptr},
    {"{{ 'a' }}\n{{ 'b' }}\n\n",
     "{}", "a\nb\n", nullptr},
    {"line1\nline2\r\n\r\n",
     "{}", "line1\nline2\n", nullptr},
    {"\t{% if true %}tab{% endif %}",
     "{}", "tab", nullptr},
    {"\xe3""\x80""\x80""{% if true %}ideographic{% endif %}",
     "{}", "ideographic", nullptr},
    {"{{ 'x' }}  {% if true %}y{% endif %}\n  {{ 'z' }}",
     "{}", "x  y  z", nullptr},
    {"{% if true +%}\nx\n{%+ endif %}",
     "{}", "\nx\n", nullptr},
    {"a\n{% raw %}\n  {{ x }} {% if %}\n{% endraw %}\nb",
     "{}", "a\n\n  {{ x }} {% if %}\nb", nullptr},
    {"{%- macro f(x) -%}\n  <{{ x }}>\n{%- endmacro -%}\n{{ f(1) }}\n{{ f(2) }}",
     "{}", "<1>\n<2>", nullptr},
    {"<ul>\n    {% for i in [1,2] %}\n    <li>{{ i }}</li>\n    {% endfor %}\n</ul>",
     "{}", "<ul>\n    <li>1</li>\n    <li>2</li>\n</ul>", nullptr},
};
TEST(JinjaSemantics, Whitespace) { check(kWhitespace, std::size(kWhitespace)); }

constexpr Case kScoping[] = {
    {"{% for i in [1,2,3] %}{% if loop.first %}{% set a = 1 %}{% endif %}[{{ a }}]{% endfor %}",
     "{}", "[1][][]", nullptr},
    {"{% set a = 5 %}{% for i in [1,2,3] %}{% set a = a + i %}[{{ a }}]{% endfor %}{{ a }}",
     "{}", "[6][7][8]5", nullptr},
    {"{% set t = 'a' %}{% if t == 'a' %}{% set t = 'b' %}{% endif %}{{ t }}",
     "{}", "b", nullptr},
    {"{% set ns = namespace(n=0) %}{% for i in range(5) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}",
     "{}", "10", nullptr},
    {"{% macro m() %}{{ x }}{% endmacro %}{% set x = 1 %}{{ m() }}{% set x = 2 %}{{ m() }}",
     "{}", "12", nullptr},
    {"{% macro m() %}{% if x is not defined %}{% set x = 'd' %}{% endif %}{{ x }}{% endmacro %}{{ m() }}{% set x = 2 %}{{ m() }}",
     "{}", "d2", nullptr},
    {"{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{{ a is defined }}",
     "{}", "3False", nullptr},
    {"{% set x %}  block {{ 1 }}  {% endset %}[{{ x }}]{% set y | trim | upper %}  z  {% endset %}[{{ y }}]",
     "{}", "[  block 1  ][Z]", nullptr},
    {"{% set a, b = [1, 2] %}{{ a }}{{ b }}{% for x, y in [[1,2],[3,4]] %}{{ x*y }}{% endfor %}{% for (x, y) in [(5, 6)] %}{{ x+y }}{% endfor %}",
     "{}", "1221211", nullptr},
    {"{% set x = 1 %}{% set x.y = 2 %}",
     "{}", nullptr, "cannot assign attribute on non-namespace object"},
};
TEST(JinjaSemantics, Scoping) { check(kScoping, std::size(kScoping)); }

constexpr Case kLoops[] = {
    {"{% for x in [1,2,3] if x > 1 %}{{ loop.index }}/{{ loop.length }}{{ loop.last }},{% endfor %}",
     "{}", "1/2False,2/2True,", nullptr},
    {"{% for x in 'ab' %}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.previtem }}{{ loop.nextitem }}{{ loop.cycle('o','e') }}|{% endfor %}",
     "{}", "021bo|110ae|", nullptr},
    {"{% for x in [1,1,2] %}{{ loop.changed(x) }}{% endfor %}",
     "{}", "TrueFalseTrue", nullptr},
    {"{% for a in [1,2] %}{% for b in [3,4] %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ loop.index }}|{% endfor %}",
     "{}", "113 214 1|123 224 2|", nullptr},
    {"{% for x in [] %}a{% else %}empty{% endfor %}{% for x in [1] %}a{% else %}b{% endfor %}",
     "{}", "emptya", nullptr},
    {"{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}",
     "{}", "0134", nullptr},
    {"{% for k in {'b': 1, 'a': 2} %}{{ k }}{% endfor %}{% for c in 'h\xc3""\xa9""' %}[{{ c }}]{% endfor %}",
     "{}", "ba[h][\xc3""\xa9""]", nullptr},
    {"{% for k, v in x|items %}{{ k }}={{ v }};{% endfor %}{% for k, v in x.items() %}{{ k }}{% endfor %}",
     "{\"x\": {\"b\": 1, \"a\": 2}}", "b=1;a=2;ba", nullptr},
    {"{% for i in none %}{% endfor %}",
     "{}", nullptr, "TypeError: 'NoneType' object is not iterable"},
};
TEST(JinjaSemantics, Loops) { check(kLoops, std::size(kLoops)); }

constexpr Case kMacros[] = {
    {"{% macro m(a, b=2, c=a) %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ m(1) }}{{ m(1, 3) }}{{ m(1, c=5) }}{{ m(b=9, a=8) }}",
     "{}", "121131125898", nullptr},
    {"{% macro m(a) %}[{{ a }}]{% endmacro %}{{ m(1) ~ 'x' }}{% set s = m(2) %}{{ s|length }}{{ m(3).startswith('[') }}",
     "{}", "[1]x3True", nullptr},
    {"{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}",
     "{}", nullptr, "takes not more than 1 argument(s)"},
};
TEST(JinjaSemantics, Macros) { check(kMacros, std::size(kMacros)); }

constexpr Case kExpressions[] = {
    {"{{ 1e16 }} {{ 0.1 }} {{ 1/3 }} {{ 7//2 }} {{ 7/2 }} {{ -7//2 }} {{ -7 % 3 }} {{ 2**10 }} {{ 2**-1 }} {{ 1e-5 }} {{ 1.5e300 }} {{ 3.0 }}",
     "{}", "1e+16 0.1 0.3333333333333333 3 3.5 -4 2 1024 0.5 1e-05 1.5e+300 3.0", nullptr},
    {"{{ -1|abs }}{{ - 2 ** 2 }}{{ 2 ** 3 ** 2 }}{{ 10 - 2 - 3 }}{{ 2 + 3 * 4 }}{{ 'a' ~ 1 ~ 2 }}{{ 7 % 4 * 2 }}",
     "{}", "1464514a126", nullptr},
    {"{{ 'a' ~ 1 + 2 }}",
     "{}", nullptr, "TypeError: can only concatenate str"},
    {"{{ 1 < 2 < 3 }}{{ 3 > 2 > 2 }}{{ 1 == 1 != 2 }}",
     "{}", "TrueFalseTrue", nullptr},
    {"{{ a if b }}|{{ a if b else c }}|{{ 1 if 0 else 2 if 0 else 3 }}",
     "{\"a\": 1, \"b\": false, \"c\": 3}", "|3|3", nullptr},
    {"{{ a or b }}|{{ a and b }}|{{ not a }}|{{ '' or 'x' }}|{{ 0 and 1 }}|{{ [] or {} }}",
     "{\"a\": 1, \"b\": 0}", "1|0|False|x|0|{}", nullptr},
    {"{{ 1 == 1.0 }}{{ 'a' < 'b' }}{{ [1,2] < [1,3] }}{{ true == 1 }}{{ none == none }}{{ [1] == (1,) }}",
     "{}", "TrueTrueTrueTrueTrueFalse", nullptr},
    {"{{ 'b' in 'abc' }}{{ 'x' not in ['x'] }}{{ 'a' in {'a': 1} }}{{ 1 in [1.0] }}{{ 'z' in u }}",
     "{}", "TrueFalseTrueTrueFalse", nullptr},
    {"{{ [1, 2] + [3] }}{{ (1,) + (2,) }}{{ 'a' * 0 }}{{ 'x' * 3 }}{{ [1] * 3 }}",
     "{}", "[1, 2, 3](1, 2)xxx[1, 1, 1]", nullptr},
    {"{{ 'abc'[::-1] }}{{ 'h\xc3""\xa9""llo'[1:3] }}{{ 'h\xc3""\xa9""llo'|length }}{{ 'h\xc3""\xa9""llo'[-1] }}{{ [1,2,3,4][1:] }}{{ [1,2,3,4][::2] }}",
     "{}", "cba\xc3""\xa9""l5o[2, 3, 4][1, 3]", nullptr},
    {"{{ (1, 2)[0] }}{{ [[1, 2]][0][1] }}{{ 'abc'[1] }}{{ x.0 }}",
     "{\"x\": [7]}", "12b7", nullptr},
    {"{{ d.b.c[1] }}{{ d['b']['c'][-1] }}{{ d == {'b': {'c': [1, 2]}, 'a': 1} }}",
     "{\"d\": {\"a\": 1, \"b\": {\"c\": [1, 2]}}}", "22True", nullptr},
    {"{{ '%s-%d' % ('a', 3) }}{{ '%05.2f' % 3.14159 }}{{ '%(x)s!' % {'x': 1} }}",
     "{}", "a-303.141!", nullptr},
    {"{{ '\\n\\t\\\\' }}|{{ \"\\u00e9\" }}|{{ '\\x41' }}|{{ 'a' 'b' }}",
     "{}", "\n\t\\|\xc3""\xa9""|A|ab", nullptr},
    {"{{ 0x1F }}{{ 0o17 }}{{ 0b101 }}{{ 1_000 }}{{ 1.5e3 }}",
     "{}", "3115510001500.0", nullptr},
    {"{{ 'a' + 1 }}",
     "{}", nullptr, "TypeError: can only concatenate str (not \"int\") to str"},
    {"{{ 1 < 'a' }}",
     "{}", nullptr, "TypeError: '<' not supported between instances of 'int' and 'str'"},
    {"{{ 5 // 0 }}",
     "{}", nullptr, "ZeroDivisionError"},
};
TEST(JinjaSemantics, Expressions) { check(kExpressions, std::size(kExpressions)); }

constexpr Case kPrinting[] = {
    {"{{ [1,2] }}{{ {'a': none, 'b': 1.0, 'c': \"it's\"} }}{{ (1,) }}{{ true }}{{ () }}",
     "{}", "[1, 2]{'a': None, 'b': 1.0, 'c': \"it's\"}(1,)True()", nullptr},
    {"{{ none }}|{{ undefined_var }}|{{ none is none }}",
     "{}", "None||True", nullptr},
    {"{{ ['\xe3""\x80""\x80""', '\xc2""\xa0""', '\xc3""\xa9""', '\\x7f', '\xe2""\x80""\x8d""'] }}",
     "{}", "['\\u3000', '\\xa0', '\xc3""\xa9""', '\\x7f', '\\u200d']", nullptr},
    {"{% set ns = namespace(a=1) %}{{ ns }}",
     "{}", "<Namespace {'a': 1}>", nullptr},
    {"{{ 'a' + ('<b>'|safe) }}|{{ ('<b>'|safe) + '<' }}|{{ '<' ~ ('<b>'|safe) }}",
     "{}", "a<b>|<b>&lt;|<<b>", nullptr},
};
TEST(JinjaSemantics, Printing) { check(kPrinting, std::size(kPrinting)); }

constexpr Case kUndefined[] = {
    {"{{ u ~ 'x' }}{{ u|length }}{{ u|list }}{{ u|string }}{{ u|trim }}{{ u|join }}{{ u|upper }}",
     "{}", "x0[]", nullptr},
    {"{{ x['y'] }}|{{ x[0] }}|{{ [1][5] }}|{{ x.y is defined }}|{{ x.a }}",
     "{\"x\": {\"a\": 1}}", "|||False|1", nullptr},
    {"{{ x.content.content is defined }}",
     "{\"x\": {\"content\": \"str\"}}", "False", nullptr},
    {"{{ x.y.z }}",
     "{\"x\": {}}", nullptr, "UndefinedError: 'dict object' has no attribute 'y'"},
    {"{{ u + 1 }}",
     "{}", nullptr, "UndefinedError: 'u' is undefined"},
    {"{{ x.split('a') }}",
     "{\"x\": null}", nullptr, "UndefinedError: 'None' has no attribute 'split'"},
    {"{{ d['items'] }}|{{ d.items()|list }}",
     "{\"d\": {\"items\": 5}}", "5|[('items', 5)]", nullptr},
};
TEST(JinjaSemantics, Undefined) { check(kUndefined, std::size(kUndefined)); }

constexpr Case kFilters[] = {
    {"{{ x|tojson }}",
     "{\"x\": {\"b\": [1, 2.5, \"\xc3""\xa9""\", null, true], \"a\": \"q\\\"\\n\\u0001\"}}", "{\"b\": [1, 2.5, \"\xc3""\xa9""\", null, true], \"a\": \"q\\\"\\n\\u0001\"}", nullptr},
    {"{{ x|tojson(indent=2) }}|{{ x|tojson(ensure_ascii=True) }}|{{ x|tojson(sort_keys=True) }}|{{ [] |tojson(indent=2)}}",
     "{\"x\": {\"b\": [1, [], {}, \"\xc3""\xa9""\xf0""\x9f""\x98""\x80""\"], \"a\": {\"z\": 1}}}", "{\n  \"b\": [\n    1,\n    [],\n    {},\n    \"\xc3""\xa9""\xf0""\x9f""\x98""\x80""\"\n  ],\n  \"a\": {\n    \"z\": 1\n  }\n}|{\"b\": [1, [], {}, \"\\u00e9\\ud83d\\ude00\"], \"a\": {\"z\": 1}}|{\"a\": {\"z\": 1}, \"b\": [1, [], {}, \"\xc3""\xa9""\xf0""\x9f""\x98""\x80""\"]}|[]", nullptr},
    {"{{ x|tojson(separators=(',', ':')) }}{{ [1.0, 1e20, 1e-7]|tojson }}",
     "{\"x\": {\"b\": [1, 2]}}", "{\"b\":[1,2]}[1.0, 1e+20, 1e-07]", nullptr},
    {"{{ [1,2]|map('string')|tojson }}",
     "{}", nullptr, "TypeError: Object of type generator is not JSON serializable"},
    {"{{ x|dictsort }}{{ x|dictsort(by='value') }}",
     "{\"x\": {\"b\": 1, \"a\": 2, \"C\": 0}}", "[('a', 2), ('b', 1), ('C', 0)][('C', 0), ('b', 1), ('a', 2)]", nullptr},
    {"{{ ['b','A','c']|sort }}{{ ['b','A','c']|sort(case_sensitive=true) }}{{ [3,1,2]|sort(reverse=true) }}{{ users|sort(attribute='age')|map(attribute='name')|join(',') }}",
     "{\"users\": [{\"name\": \"x\", \"age\": 3}, {\"name\": \"y\", \"age\": 1}]}", "['A', 'b', 'c']['A', 'b', 'c'][3, 2, 1]y,x", nullptr},
    {"{{ users|selectattr('age', 'gt', 1)|map(attribute='name')|list }}{{ users|rejectattr('age', 'equalto', 1)|list|length }}{{ [0,1,2,None]|select|list }}{{ [1,2,3]|reject('odd')|list }}",
     "{\"users\": [{\"name\": \"x\", \"age\": 3}, {\"name\": \"y\", \"age\": 1}]}", "['x']1[1, 2][2]", nullptr},
    {"{{ users|map(attribute='missing', default='d')|list }}{{ users|map(attribute='name')|first }}{{ users|map(attribute='name.0')|list }}",
     "{\"users\": [{\"name\": \"x\", \"age\": 3}, {\"name\": \"y\", \"age\": 1}]}", "['d', 'd']x['x', 'y']", nullptr},
    {"{{ ['a','b']|join }}{{ ['a','b']|join('-') }}{{ [1,2]|join(', ') }}",
     "{}", "aba-b1, 2", nullptr},
    {"{{ x|default('d') }}{{ ''|default('e') }}{{ ''|default('e', true) }}{{ none|default('n') }}{{ undefined|d('u') }}",
     "{}", "deNoneu", nullptr},
    {"{{ '  hi  '|trim }}|{{ 'xxhixx'|trim('x') }}|{{ 'hello world'|title }}|{{ 'hELLO'|capitalize }}|{{ 'aBc'|upper }}{{ 'aBc'|lower }}|{{ 'aaa'|replace('a','b',2) }}",
     "{}", "hi|hi|Hello World|Hello|ABCabc|bba", nullptr},
    {"{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb\\n\\nc'|indent(2, true) }}|{{ 'a\\nb\\n\\nc'|indent(2, blank=true) }}|{{ 'a\\nb'|indent('> ') }}",
     "{}", "a\n    b\n\n    c|  a\n  b\n\n  c|a\n  b\n  \n  c|a\n> b", nullptr},
    {"{{ '42'|int }}{{ '4.7'|int }}{{ 'x'|int }}{{ 'x'|int(5) }}{{ 4.7|int }}{{ '3.5'|float }}{{ 2|float }}{{ 2.5|round }}{{ 3.14159|round(2) }}{{ 2.5|round(0, 'floor') }}",
     "{}", "4240543.52.02.03.142.0", nullptr},
    {"{{ [3,1,2]|min }}{{ [3,1,2]|max }}{{ [1,2,3]|sum }}{{ [1,1,2]|unique|list }}{{ 'abc'|reverse }}{{ [1,2,3]|reverse|list }}{{ [1,2]|last }}{{ 'abc'|first }}{{ []|first is defined }}",
     "{}", "136[1, 2]cba[3, 2, 1]2aFalse", nullptr},
    {"{{ [1,2,3,4,5]|batch(2)|list }}{{ 'ab'|center(7) }}|",
     "{}", "[[1, 2], [3, 4], [5]]   ab  |", nullptr},
    {"{{ x|items|list }}",
     "{\"x\": [1]}", nullptr, "TypeError: Can only get item pairs from a mapping."},
    {"{{ [1]|map('string')|length }}",
     "{}", nullptr, "TypeError: object of type 'generator' has no len()"},
};
TEST(JinjaSemantics, Filters) { check(kFilters, std::size(kFilters)); }

constexpr Case kTests[] = {
    {"{{ x is mapping }}{{ x is iterable }}{{ x is sequence }}{{ x is string }}{{ 'a' is sequence }}{{ 1 is number }}{{ true is integer }}{{ 1.0 is float }}{{ u is defined }}{{ 3 is odd }}{{ 9 is divisibleby 3 }}{{ 'a' is in 'abc' }}{{ 1 is true }}{{ x.items is callable }}{{ [1]|map('string') is sequence }}",
     "{\"x\": {\"a\": 1}}", "TrueTrueTrueFalseTrueTrueFalseTrueFalseTrueTrueTrueFalseTrueFalse", nullptr},
    {"{{ x is string }}{{ x is not string }}{{ not x is string }}",
     "{\"x\": \"s\"}", "TrueFalseFalse", nullptr},
    {"{% if x is defined and x %}yes{% elif x is defined %}def{% else %}no{% endif %}",
     "{\"x\": 0}", "def", nullptr},
};
TEST(JinjaSemantics, Tests) { check(kTests, std::size(kTests)); }

constexpr Case kMethods[] = {
    {"{{ 'a b  c'.split() }}{{ ' a '.strip() }}{{ 'a,b'.split(',', 1) }}{{ 'a,b,c'.rsplit(',', 1) }}{{ '  x  y '.split(None, 1) }}",
     "{}", "['a', 'b', 'c']a['a', 'b']['a,b', 'c']['x', 'y ']", nullptr},
    {"{{ '  \\t\\n a \xe3""\x80""\x80""'|trim }}|{{ '\xe3""\x80""\x80""x\xe3""\x80""\x80""'.strip() }}|{{ 'xyx'.strip('x') }}",
     "{}", "a|x|y", nullptr},
    {"{{ msg.content.split('</think>')[-1].lstrip('\\n') }}",
     "{\"msg\": {\"content\": \"<think>\\nr\\n</think>\\n\\nanswer\"}}", "answer", nullptr},
    {"{{ s.splitlines() }}",
     "{\"s\": \"a\\nb\\r\\nc\\rd\xe2""\x80""\xa8""e\\n\"}", "['a', 'b', 'c', 'd', 'e']", nullptr},
    {"{{ 'abc'.upper() }}{{ 'a-b'.replace('-', '+') }}{{ 'abc'.find('c') }}{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x','c')) }}{{ ', '.join(['a','b']) }}{{ 'a{}b{}'.format(1, 'x') }}",
     "{}", "ABCa+b2TrueTruea, ba1bx", nullptr},
    {"{{ {'a':3}.get('a') }}|{{ {'a':3}.get('b') }}|{{ {'a':3}.get('b', 7) }}",
     "{}", "3|None|7", nullptr},
    {"{{ [1,2].append(3) }}",
     "{}", nullptr, "SecurityError: access to attribute 'append' of 'list' object is unsafe."},
    {"{% set l = [1] %}{% set f = l.append %}ok",
     "{}", "ok", nullptr},
};
TEST(JinjaSemantics, Methods) { check(kMethods, std::size(kMethods)); }

constexpr Case kGlobals[] = {
    {"{{ range(3)|list }}{{ range(0, 10, 3)|list }}{{ range(5, 0, -2)|list }}",
     "{}", "[0, 1, 2][0, 3, 6, 9][5, 3, 1]", nullptr},
    {"{{ dict(a=1, b=2) }}{{ namespace(x=1).x }}{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}",
     "{}", "{'a': 1, 'b': 2}112", nullptr},
    {"{{ strftime_now('%Y-%m-%d %a %B') }}",
     "{}", "2026-01-15 Thu January", nullptr},
    {"{{ raise_exception('boom: ' ~ 1) }}",
     "{}", nullptr, "t:1:19: boom: 1"},
    {"{{ range(100001)|length }}",
     "{}", nullptr, "Range too big"},
};
TEST(JinjaSemantics, Globals) { check(kGlobals, std::size(kGlobals)); }

}  // namespace
}  // namespace kt
