// The template language feature by feature, on small inline templates. Each expected string
// is what Python's jinja2 (configured like transformers) renders; InlineCasesMatchOracle
// re-checks the whole table against jinja2 itself when it is installed.
#include <gtest/gtest.h>

#include <exception>

#include "base/error.h"
#include "jinja_oracle.h"
#include "template/chat_template.h"
#include "test_paths.h"

namespace rapide {
namespace {

struct Case {
  const char* name;
  const char* source;
  const char* context;   // JSON object of variables
  const char* expected;  // rendered text, or the error message when fails
  bool fails;
};

const Case kCases[] = {
    {"Text", "hello world", R"json({})json", "hello world", false},
    {"TrailingNewlineDropped", "a\n", R"json({})json", "a", false},
    {"PrintVariable", "{{ x }}|{{ y }}|{{ missing }}|", R"json({"x": "s", "y": 3})json", "s|3||",
     false},
    {"PythonStr",
     "{{ [1, 'a', none, true, 1.0, {'k': \"it's\"}] }}|{{ 1e20 }}|{{ 0.1 + 0.2 }}|{{ 2.5e-5 }}|{{ "
     "-0.0 }}",
     R"json({})json",
     "[1, 'a', None, True, 1.0, {'k': \"it's\"}]|1e+20|0.30000000000000004|2.5e-05|-0.0", false},
    {"Arithmetic",
     "{{ 7 / 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 1 + 2.0 }} {{ 'ab' * 3 "
     "}} {{ 3 - true }} {{ 7.5 // 2 }}",
     R"json({})json", "3.5 -4 2 1024 0.5 3.0 ababab 2 3.0", false},
    {"Concat", "{{ 'a' ~ 1 ~ none ~ missing }}|{{ 'x' + 'y' }}|{{ [1] + [2, 3] }}", R"json({})json",
     "a1None|xy|[1, 2, 3]", false},
    {"Comparisons",
     "{{ 1 < 2 < 3 }} {{ 1 == 1.0 }} {{ 'a' != 'b' }} {{ 'b' >= 'a' }} {{ [1, 2] < [1, 3] }} {{ 2 "
     "in [1, 2] }} {{ 'x' not in 'abc' }} {{ 'k' in {'k': 1} }}",
     R"json({})json", "True True True True True True True True", false},
    {"Logic",
     "{{ 0 or 'b' }} {{ 1 and 'c' }} {{ not none }} {{ none or [] }} {{ 'y' if x else 'n' }} {{ "
     "'y' if not x }}|",
     R"json({"x": 0})json", "b c True [] n y|", false},
    {"Precedence",
     "{{ -2 ** 2 }} {{ -x|abs }} {{ not 1 == 2 }} {{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 'a' ~ (1 + "
     "2) }} {{ 1 if 0 else 2 if 0 else 3 }} {{ x|string + '!' }}",
     R"json({"x": 3})json", "4 3 True 7 9 a3 3 3!", false},
    {"ConcatBindsTighterThanPlus", "{{ 'a' ~ 1 + 2 }}", R"json({})json",
     "can only concatenate str (not \"int\") to str", true},  // TypeError
    {"Slicing",
     "{{ s[1:] }}|{{ s[-2:] }}|{{ s[::-1] }}|{{ s[1:4:2] }}|{{ l[:-1] }}|{{ l[5:] }}|{{ u[1:3] "
     "}}|{{ u[-1] }}",
     R"json({"s": "abcdef", "l": [1, 2, 3], "u": "héllo"})json",
     "bcdef|ef|fedcba|bd|[1, 2]|[]|él|o", false},
    {"Indexing",
     "{{ l[0] }} {{ l[-1] }} {{ d['a'] }} {{ d.a }} {{ d.b.c }} {{ l.1 }}|{{ l[9] }}|{{ d.zz }}|",
     R"json({"l": [1, 2], "d": {"a": 1, "b": {"c": "deep"}}})json", "1 2 1 1 deep 2|||", false},
    {"Literals",
     "{{ {'a': [1, (2, 3)], 'b': {'c': none}} }}|{{ (1,) }}|{{ () }}|{{ 'con' 'cat' }}|{{ "
     "'esc\\n\\t\\'q\\' \\u00e9 \\x41' }}",
     R"json({})json", "{'a': [1, (2, 3)], 'b': {'c': None}}|(1,)|()|concat|esc\n\t'q' é A", false},
    {"IfElifElse",
     "{% for v in [1, 2, 3] %}{% if v == 1 %}one{% elif v == 2 %}two{% else %}many{% endif %} {% "
     "endfor %}",
     R"json({})json", "one two many ", false},
    {"ForLoopVariables",
     "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 "
     "}}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.cycle('o', 'e') }}|{% endfor %}",
     R"json({})json", "1032TrueFalse3o|2121FalseFalse3e|3210FalseTrue3o|", false},
    {"ForPrevNext",
     "{% for x in [1, 2, 3] %}{{ loop.previtem }}<{{ x }}>{{ loop.nextitem }};{% endfor %}",
     R"json({})json", "<1>2;1<2>3;2<3>;", false},
    {"ForFilterAndElse",
     "{% for x in range(6) if x is odd %}{{ x }}{{ loop.length }},{% endfor %}{% for x in [] "
     "%}no{% else %}empty{% endfor %}",
     R"json({})json", "13,33,53,empty", false},
    {"ForUnpackAndDict",
     "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}{% "
     "for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}",
     R"json({"d": {"z": 1, "a": 2}})json", "z=1;a=2;za37", false},
    {"ForScopeDoesNotLeak",
     "{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = i * 10 %}{{ x }} {% endfor %}{{ x }}",
     R"json({})json", "110 120 1", false},
    {"BreakContinue",
     "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% "
     "endif %}{{ i }}{% endfor %}",
     R"json({})json", "0134", false},
    {"NestedLoops",
     "{% for a in [1, 2] %}{% for b in 'xy' %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ "
     "loop.index }}|{% endfor %}",
     R"json({})json", "11x 21y 1|12x 22y 2|", false},
    {"Namespace",
     "{% set ns = namespace(n=0, seen=[]) %}{% for i in [3, 4] %}{% set ns.n = ns.n + i %}{% set "
     "ns.seen = ns.seen + [i] %}{% endfor %}{{ ns.n }} {{ ns.seen }} {{ ns.missing is defined }}",
     R"json({})json", "7 [3, 4] False", false},
    {"SetBlockAndFilterBlock",
     "{% set body %}  Hi {{ name }}  {% endset %}[{{ body }}]{% set t | trim %}  x  {% endset "
     "%}[{{ t }}]{% filter upper %}shout {{ name }}{% endfilter %}",
     R"json({"name": "bo"})json", "[  Hi bo  ][x]SHOUT BO", false},
    {"SetUnpack", "{% set a, b = [1, 2] %}{{ a }}{{ b }}{% set c = 1, 2 %}", R"json({})json", "12",
     false},
    {"Macro",
     "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ "
     "greet('B', '?') }} {{ greet(punct='.', name='C') }} [{{ greet() }}]",
     R"json({})json", "Hi A! Hi B? Hi C. [Hi !]", false},
    {"MacroScopeAndRecursion",
     "{% set g = 'G' %}{% macro f(n) %}{% if n > 0 %}{{ n }}{{ g }}{{ f(n - 1) }}{% endif %}{% set "
     "local = 1 %}{% endmacro %}{{ f(3) }}{{ local is defined }}",
     R"json({})json", "3G2G1GFalse", false},
    {"CallBlock",
     "{% macro box(title) %}[{{ title }}:{{ caller() }}]{% endmacro %}{% call box('t') %}inside {{ "
     "v }}{% endcall %}{% macro each(items) %}{% for i in items %}{{ caller(i) }}{% endfor %}{% "
     "endmacro %}{% call(x) each([1, 2]) %}<{{ x }}>{% endcall %}",
     R"json({"v": 5})json", "[t:inside 5]<1><2>", false},
    {"WhitespaceControl",
     "a  {{- ' b ' -}}  c\n  {%- if true -%}\n  d  \n{%- endif %}  e {#- comment -#}  f",
     R"json({})json", "a b cd  ef", false},
    {"TrimAndLstripBlocks",
     "<ul>\n    {% for i in [1, 2] %}\n    <li>{{ i }}</li>\n    {% endfor %}\n</ul>\n{# note "
     "#}\nend  {% if true %}x{% endif %}\n    {%+ if true %}kept{% endif %}\n",
     R"json({})json", "<ul>\n    <li>1</li>\n    <li>2</li>\n</ul>\nend  x    kept", false},
    {"TrimBlocksPlusSuffix", "{% if true +%}\nnewline kept\n{% endif %}\n{{ 'var' }}\nafter",
     R"json({})json", "\nnewline kept\nvar\nafter", false},
    {"Comments", "a{# one #}b{#- two -#}  c\n  {# three #}\nd", R"json({})json", "abc\nd", false},
    {"Raw", "{% raw %}{{ not evaluated }} {% if %}{% endraw %}!", R"json({})json",
     "{{ not evaluated }} {% if %}!", false},
    {"CrLfNormalized", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\n", R"json({})json", "a\nb\n",
     false},
    {"FiltersStrings",
     "{{ '  x y  '|trim }}|{{ 'xxhixx'|trim('x') }}|{{ 'aB c'|upper }}|{{ 'aB c'|lower }}|{{ "
     "'hello wORLD'|capitalize }}|{{ \"they're bill's\"|title }}|{{ 'a-b-a'|replace('a', 'o') "
     "}}|{{ 'a-b-a'|replace('a', 'o', 1) }}|{{ 'one two  three'|wordcount }}",
     R"json({})json", "x y|hi|AB C|ab c|Hello world|They're Bill's|o-b-o|o-b-a|3", false},
    {"FiltersDefault",
     "{{ missing|default('d') }}|{{ ''|default('d') }}|{{ ''|default('d', true) }}|{{ none|d('n') "
     "}}|{{ x|default('d') }}",
     R"json({"x": 0})json", "d||d|None|0", false},
    {"FiltersSequences",
     "{{ [3, 1, 2]|first }}{{ [3, 1, 2]|last }}{{ [3, 1, 2]|length }}{{ 'héllo'|length }}{{ {'a': "
     "1}|count }}|{{ [1, 2]|join(', ') }}|{{ 'abc'|list }}|{{ [1, 2, 3]|reverse|list }}|{{ "
     "'abc'|reverse }}|{{ [3, 1, 2]|sort }}|{{ ['b', 'A', 'a']|sort }}|{{ [3, 1, "
     "2]|sort(reverse=true) }}|{{ ['a', 'A', 'b', 'a']|unique|list }}|{{ [1, 5, 2]|max }}{{ [1, 5, "
     "2]|min }}{{ [1, 5, 2]|sum }}",
     R"json({})json",
     "32351|1, 2|['a', 'b', 'c']|[3, 2, 1]|cba|[1, 2, 3]|['A', 'a', 'b']|[3, 2, 1]|['a', 'b']|518",
     false},
    {"FiltersNumbers",
     "{{ '42'|int }} {{ '4.7'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ 3.9|int }} {{ '2.5'|float "
     "}} {{ 2|float }} {{ -3|abs }} {{ 2.675|round(2) }} {{ 2.5|round }} {{ 3.5|round }} {{ "
     "7|round }} {{ 2.1|round(0, 'ceil') }} {{ 42|string ~ '!' }}",
     R"json({})json", "42 4 0 7 3 2.5 2.0 3 2.67 2.0 4.0 7 3.0 42!", false},
    {"FiltersMappings",
     "{{ d|items|list }}|{{ d|dictsort }}|{{ d|dictsort(by='value', reverse=true) }}|{% for k, v "
     "in d|items %}{{ k }}{{ v }}{% endfor %}",
     R"json({"d": {"b": 1, "a": 2}})json",
     "[('b', 1), ('a', 2)]|[('a', 2), ('b', 1)]|[('a', 2), ('b', 1)]|b1a2", false},
    {"FiltersSelectMap",
     "{{ users|selectattr('active')|map(attribute='name')|join(',') }}|{{ "
     "users|rejectattr('active')|map(attribute='name')|list }}|{{ users|selectattr('role', "
     "'equalto', 'admin')|list|length }}|{{ [1, 2, 3, 4]|select('even')|list }}|{{ [1, 2, 3, "
     "4]|reject('odd')|list }}|{{ [0, 1, '', 'a']|select|list }}|{{ ['a', 'b']|map('upper')|list "
     "}}|{{ users|map(attribute='missing', default='?')|list }}|{{ "
     "users|map(attribute='tags.0')|list }}",
     R"json({"users": [{"name": "ann", "active": true, "role": "admin", "tags": ["x"]}, {"name": "bob", "active": false, "role": "user", "tags": ["y"]}]})json",
     "ann|['bob']|1|[2, 4]|[2, 4]|[1, 'a']|['A', 'B']|['?', '?']|['x', 'y']", false},
    {"FilterIndent",
     "[{{ 'a\\nb\\n\\nc'|indent }}]|[{{ 'a\\nb'|indent(2, true) }}]|[{{ 'a\\n\\nb'|indent(2, "
     "blank=true) }}]|[{{ 'x\\n'|indent(3) }}]",
     R"json({})json", "[a\n    b\n\n    c]|[  a\n  b]|[a\n  \n  b]|[x\n]", false},
    {"FilterToJson",
     "{{ d|tojson }}|{{ d|tojson(indent=2) }}|{{ [] |tojson }}{{ {}|tojson(indent=4) }}|{{ "
     "'é\"\\n'|tojson }}|{{ d|tojson(sort_keys=true) }}|{{ 'é'|tojson(true) }}",
     R"json({"d": {"b": [1, 2.0, null, true], "a": {"x": "ü"}, "c": []}})json",
     "{\"b\": [1, 2.0, null, true], \"a\": {\"x\": \"ü\"}, \"c\": []}|{\n  \"b\": [\n    1,\n    "
     "2.0,\n    null,\n    true\n  ],\n  \"a\": {\n    \"x\": \"ü\"\n  },\n  \"c\": "
     "[]\n}|[]{}|\"é\\\"\\n\"|{\"a\": {\"x\": \"ü\"}, \"b\": [1, 2.0, null, true], \"c\": "
     "[]}|\"\\u00e9\"",
     false},
    {"SafeMarkupConcatenation",
     "{{ 'a'|safe + '<b>' + {'x': '\"'}|tojson }}|{{ 'a'|safe ~ '<b>' }}|{{ '<i>'|e }}|{{ "
     "('x'|safe + '&')|length }}",
     R"json({})json", "a&lt;b&gt;{&#34;x&#34;: &#34;\\&#34;&#34;}|a<b>|&lt;i&gt;|6", false},
    {"Tests",
     "{{ x is defined }}{{ y is undefined }}{{ n is none }}{{ 's' is string }}{{ {} is mapping "
     "}}{{ [] is iterable }}{{ 1 is number }}{{ 1 is integer }}{{ 1.0 is integer }}{{ 1.0 is float "
     "}}{{ true is boolean }}{{ true is true }}{{ 0 is false }}{{ 3 is odd }}{{ 4 is even }}{{ 9 "
     "is divisibleby 3 }}{{ 2 is in [1, 2] }}{{ 'a' is equalto 'a' }}{{ 'a' is eq 'b' }}{{ 1 is "
     "not none }}{{ y is iterable }}{{ n is iterable }}{{ 's' is sequence }}{{ 1 is lt 2 }}{{ 'ab' "
     "is lower }}",
     R"json({"x": 1, "n": null})json",
     "TrueTrueTrueTrueTrueTrueTrueTrueFalseTrueTrueTrueFalseTrueTrueTrueTrueTrueFalseTrueTrueFalseT"
     "rueTrueTrue",
     false},
    {"StringMethods",
     "{{ ' a '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ ' a '.lstrip() }}|{{ ' a '.rstrip() }}|{{ "
     "'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ "
     "'a/b/c'.rsplit('/', 1) }}|{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}|{{ "
     "'Ab'.upper() }}{{ 'Ab'.lower() }}|{{ 'aXa'.replace('a', 'b') }}|{{ 'hi there'.title() }}|{{ "
     "'abc'.find('c') }}{{ 'abca'.count('a') }}|{{ '-'.join(['a', 'b']) }}|{{ '{} and "
     "{name}'.format(1, name='n') }}|{{ 'x</think>y'.split('</think>')[-1] }}",
     R"json({})json",
     "a|a|a | a|['a', 'b', '', 'c']|['a', 'b']|['a', 'b c']|['a/b', 'c']|TrueTrue|ABab|bXb|Hi "
     "There|22|a-b|1 and n|y",
     false},
    {"DictMethods",
     "{{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }} {{ d.get('a') }} {{ "
     "d.get('z') }} {{ d.get('z', 'dflt') }} {{ d['items'] is callable }}",
     R"json({"d": {"a": 1, "b": [2]}})json",
     "['a', 'b'] [1, [2]] [('a', 1), ('b', [2])] 1 None dflt True", false},
    {"UndefinedSemantics",
     "[{{ u }}][{{ u|length }}][{% for x in u %}x{% endfor %}][{{ u is iterable }}][{{ u == u "
     "}}][{{ u|string }}][{{ u|trim }}][{{ 'k' in u }}]",
     R"json({})json", "[][0][][True][True][][][False]", false},
    {"DictAttributeIsMethodFirst",
     "{{ d.items is callable }} {{ d['items'] }} {{ d.get is callable }}",
     R"json({"d": {"items": "value"}})json", "True value True", false},
    {"PrintTypes",
     "{{ none }} {{ true }} {{ false }} {{ 10 }} {{ 1.5 }} {{ 3.0 }} {{ 1e3 }} {{ "
     "12345678901234567.0 }} {{ 0.0001 }} {{ 0.00001 }} {{ \"q'uote\" }} {{ ['q\\'s', \"d\\\"q\", "
     "'n\\nl'] }}",
     R"json({})json",
     "None True False 10 1.5 3.0 1000.0 1.2345678901234568e+16 0.0001 1e-05 q'uote [\"q's\", "
     "'d\"q', 'n\\nl']",
     false},
    {"WhitespaceEdges",
     "{%- if true %}\n\tA\n\t{% if true %}\n\tB {{ 'v' }}\n  text {% if true %}C{% endif %}\n{% "
     "endif %}\n{{ 'x' }}\n   {{ 'y' }}\n{%- endif -%}\n  end",
     R"json({})json", "\tA\n\tB v\n  text Cx\n   yend", false},
    {"MultiLineTags", "{{\n  x\n  + 1\n}}|{%\n  if x\n%}yes{% endif %}", R"json({"x": 1})json",
     "2|yes", false},
    {"MacroDefaultsSeeEarlierParams",
     "{% macro m(a, b=a * 2, c=none) %}{{ a }},{{ b }},{{ c }}{% endmacro %}{{ m(1) }}|{{ m(1, "
     "c='z') }}",
     R"json({})json", "1,2,None|1,2,z", false},
    {"MoreFilters",
     "{{ '%s-%d%%'|format('a', 3) }}|{{ [1, 2, 3]|join }}|{{ none|string }}|{{ 1.0|int }}|{{ "
     "'3'|int + 1 }}|{{ range(3)|list }}|{{ range(1, 10, 3)|list }}|{{ [{'n': 2}, {'n': "
     "1}]|sort(attribute='n')|map(attribute='n')|list }}|{{ ['b', 'a']|sort|first }}",
     R"json({})json", "a-3%|123|None|1|4|[0, 1, 2]|[1, 4, 7]|[1, 2]|a", false},
    {"MoreOperators",
     "{{ 10 // 3 }} {{ 10 % -3 }} {{ -10 / 4 }} {{ (1, 2) == [1, 2] }} {{ {'a': 1} == {'a': 1.0} "
     "}} {{ 'abc'[10:] }}|{{ 'ab'[5] }}|{{ loop }}|{{ namespace(a=1).a }} {{ 'x' is in 'xyz' }} {{ "
     "1 if none is none }} {{ 'A'|lower is lower }} {{ 5 is divisibleby(5) }} {{ 'é' > 'e' }}",
     R"json({})json", "3 -2 -2.5 False True |||1 True 1 True True True", false},
    {"ChatIdioms",
     "{{ messages|length > 0 and messages[0].role == 'system' }} {% set x = x|default([]) + [1] "
     "%}{{ x }} {{ m.y is none }} {{ m.z is not defined }} {{ not m.z is defined }} {% for k, v in "
     "m|items %}{{ k }}{{ '' if loop.last else ',' }}{% endfor %}",
     R"json({"messages": [{"role": "system"}], "m": {"y": null, "w": 1}})json",
     "True [1] True True True y,w", false},
    {"GeneratorSemantics",
     "{{ [] | select is iterable }} {{ ([] | select) is sequence }} {{ 'yes' if [] | select else "
     "'no' }} {{ [1, 2]|map('string')|join('+') }} {{ [3, 1]|reverse|list }} {{ {'a': "
     "1}|items|list }}",
     R"json({})json", "True False yes 1+2 [1, 3] [('a', 1)]", false},
    {"GeneratorHasNoLength", "{{ [1, 2]|select|length }}", R"json({})json",
     "object of type 'generator' has no len()", true},  // TypeError
    {"GeneratorNotJson", "{{ [1, 2]|map('int')|tojson }}", R"json({})json",
     "Object of type generator is not JSON serializable", true},  // TypeError
    {"RaiseException", "before{{ raise_exception('Custom failure: ' ~ n) }}", R"json({"n": 3})json",
     "Custom failure: 3", true},  // TemplateRaised
    {"UndefinedAttributeError", "{{ a.b.c }}", R"json({"a": {}})json",
     "'dict object' has no attribute 'b'", true},  // UndefinedError
    {"NoneNotIterable", "{% for t in tools %}{% endfor %}", R"json({"tools": null})json",
     "'NoneType' object is not iterable", true},  // TypeError
    {"StringPlusUndefinedError", "{{ 'a' + missing }}", R"json({})json", "'missing' is undefined",
     true},  // UndefinedError
    {"UnsafeListMethod", "{{ l.append(1) }}", R"json({"l": []})json",
     "access to attribute 'append' of 'list' object is unsafe.", true},  // SecurityError
    {"MacroTooManyArguments", "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", R"json({})json",
     "macro 'm' takes not more than 1 argument(s)", true},  // TypeError
};

ChatTemplateInputs inputs_for(const Case& c) {
  ChatTemplateInputs in;
  in.messages = nlohmann::ordered_json::array();
  in.extra_context = nlohmann::ordered_json::parse(c.context);
  return in;
}

class JinjaLanguageTest : public ::testing::TestWithParam<Case> {};

TEST_P(JinjaLanguageTest, RendersLikeJinja2) {
  const Case& c = GetParam();
  testing::OracleResult ours = testing::render_with_rapide(c.source, inputs_for(c));
  if (!c.fails) {
    EXPECT_TRUE(ours.ok) << ours.message;
    EXPECT_EQ(ours.output, c.expected);
  } else {
    EXPECT_FALSE(ours.ok) << ours.output;
    EXPECT_NE(ours.message.find(c.expected), std::string::npos) << ours.message;
  }
}

INSTANTIATE_TEST_SUITE_P(Features, JinjaLanguageTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name);
                         });

TEST(JinjaLanguageOracle, InlineCasesMatchOracle) {
  nlohmann::ordered_json cases = nlohmann::ordered_json::array();
  for (const Case& c : kCases) cases.push_back(testing::oracle_case(c.source, inputs_for(c)));
  std::vector<testing::OracleResult> expected;
  try {
    expected = testing::run_oracle(cases);
  } catch (const testing::OracleUnavailable& e) {
    RAPIDE_MISSING_PREREQUISITE(e.what());
  }
  ASSERT_EQ(expected.size(), std::size(kCases));
  for (size_t i = 0; i < expected.size(); ++i) {
    const Case& c = kCases[i];
    EXPECT_EQ(expected[i].ok, !c.fails) << c.name;
    EXPECT_EQ(expected[i].ok ? expected[i].output : expected[i].message, c.expected) << c.name;
  }
}

// Numbers beyond int64 / double in a template (a fuzzer's find: `x.99999999999999999999`
// escaped as std::out_of_range from std::stoll and ended the process). Each renders or
// fails with rapide's own Error, as any bad template must; a float literal beyond double's
// range reads as inf, as Python reads it.
TEST(JinjaLanguage, HugeNumbersRenderOrFailClearly) {
  const char* sources[] = {
      "{{ messages.99999999999999999999 }}",
      "{{ 99999999999999999999 }}",
      "{{ '{99999999999999999999999}'.format(1) }}",
      "{{ messages | map(attribute='99999999999999999999') | list }}",
      "{{ [1] | map(attribute='0') | list }}",
  };
  ChatTemplateInputs inputs;
  inputs.messages = {{{"role", "user"}, {"content", "Hi"}}};
  for (const char* source : sources) {
    try {
      const ChatTemplate t(source);
      (void)t.render(inputs);
    } catch (const Error&) {
    } catch (const std::exception& e) {
      ADD_FAILURE() << source << ": " << e.what();
    }
  }
  EXPECT_EQ(ChatTemplate("{{ 1e999 }}|{{ -1e999 }}").render(inputs), "inf|-inf");
}

}  // namespace
}  // namespace rapide
