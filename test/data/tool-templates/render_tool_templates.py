#!/usr/bin/python3
"""Reference renderings of tool conversations through real chat templates.

Renders conversations.json's conversations (OpenAI's shape) with each template of
TEMPLATES, as transformers' apply_chat_template does (jinja2
ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols; tojson is
json.dumps; raise_exception; strftime_now fixed at 2026-01-15; bos/eos from
../chat-templates/manifest.json), in the form the template itself wants, decided
independently of kt: the form the chat-template generator found for that template's
tool-call case (manifest results 06_tool_call_result.input: OpenAI's messages, or
arguments as objects and/or content "" instead of null). Templates that do not write
the tools (DeepSeek's) get DeepSeek's documented "## Tools" system-prompt section,
appended to the system message. Writes expected/TEMPLATE__CONVERSATION.txt.

Run: /usr/bin/python3 test/data/tool-templates/render_tool_templates.py  (Debian python3-jinja2 3.1.2)
"""
import copy
import datetime
import json
import os
import sys

import jinja2
import jinja2.ext
import jinja2.sandbox

HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATES = [
    "deepseek-ai-DeepSeek-V3.1",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",
    "Qwen-Qwen2.5-7B-Instruct",
    "Qwen-Qwen3-0.6B",
    "mistralai-Mistral-Nemo-Instruct-2407",
    "Mistral-Small-3.2-24B-Instruct-2506",
]

CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
CALLS_END = "<｜tool▁calls▁end｜>"
CALL_BEGIN = "<｜tool▁call▁begin｜>"
CALL_END = "<｜tool▁call▁end｜>"
SEP = "<｜tool▁sep｜>"


def deepseek_tools_section(tools, v3_1):
    """DeepSeek's tool description for the system prompt (its model cards)."""
    s = "## Tools\nYou have access to the following tools:\n"
    for t in tools:
        f = t["function"]
        params = json.dumps(f.get("parameters"), ensure_ascii=False, separators=(",", ":"))
        s += "\n### " + f["name"] + "\nDescription: " + f.get("description", "") + "\n\nParameters: " + params + "\n"
    s += "\nIMPORTANT: ALWAYS adhere to this exact format for tool use:\n"
    where = ("\n\nWhere:\n\n- `tool_call_name` must be an exact match to one of the available tools\n"
             "- `tool_call_arguments` must be valid JSON that strictly follows the tool's Parameters Schema\n")
    if v3_1:
        s += (CALLS_BEGIN + CALL_BEGIN + "tool_call_name" + SEP + "tool_call_arguments" + CALL_END +
              "{{additional_tool_calls}}" + CALLS_END + where +
              "- For multiple tool calls, chain them directly without separators or spaces")
    else:
        s += (CALLS_BEGIN + CALL_BEGIN + "function" + SEP + "tool_call_name\n```json\ntool_call_arguments\n```" +
              CALL_END + CALLS_END + where + "- For multiple tool calls, separate them with a newline")
    return s


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(msg):
    raise jinja2.exceptions.TemplateError(msg)


def strftime_now(fmt):
    return datetime.datetime(2026, 1, 15, 0, 0, 0).strftime(fmt)


def main():
    manifest = json.load(open(os.path.join(HERE, "..", "chat-templates", "manifest.json")))
    data = json.load(open(os.path.join(HERE, "conversations.json")))
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                       extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    out_dir = os.path.join(HERE, "expected")
    os.makedirs(out_dir, exist_ok=True)
    for name in TEMPLATES:
        info = manifest["templates"][name]
        src = open(os.path.join(HERE, "..", "chat-templates", info["file"]), encoding="utf-8").read()
        tpl = env.from_string(src)
        form = info["results"]["06_tool_call_result"]["input"]  # messages | variants.<form>
        for conv_name, conv in data["conversations"].items():
            messages = copy.deepcopy(conv)
            for m in messages:
                if "args_object" in form:
                    for c in m.get("tool_calls") or []:
                        c["function"]["arguments"] = json.loads(c["function"]["arguments"])
                if "content_empty" in form and m.get("content") is None:
                    m["content"] = ""
            if "tool\u2581calls\u2581begin" in src:  # DeepSeek: the template does not write the tools
                section = deepseek_tools_section(data["tools"], "```json" not in src)
                if messages and messages[0]["role"] == "system" and isinstance(messages[0]["content"], str):
                    messages[0]["content"] += "\n\n" + section
                else:
                    messages.insert(0, {"role": "system", "content": section})
            text = tpl.render(messages=messages, tools=data["tools"], add_generation_prompt=True,
                              bos_token=info["bos_token"], eos_token=info["eos_token"])
            with open(os.path.join(out_dir, f"{name}__{conv_name}.txt"), "w", encoding="utf-8", newline="") as f:
                f.write(text)
            print(f"{name}__{conv_name}.txt ({form}): {len(text)} chars")
    return 0


if __name__ == "__main__":
    sys.exit(main())
