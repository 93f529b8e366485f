# Probe the GPU machine's Python stack: versions, kimi_linear sources, and what save_pretrained writes.
import os, json, shutil, sys, importlib, pathlib
out = pathlib.Path(os.environ["OUT"])
import torch, transformers
print("torch", torch.__version__, "transformers", transformers.__version__, "cuda", torch.cuda.is_available())
for m in ["tiktoken", "tokenizers", "jinja2", "safetensors"]:
    try:
        mod = importlib.import_module(m); print(m, getattr(mod, "__version__", "?"))
    except Exception as e:
        print(m, "MISSING", e)
root = pathlib.Path(transformers.__file__).parent
models = sorted(p.name for p in (root / "models").iterdir() if "kimi" in p.name or "deepseek" in p.name or "qwen3" == p.name)
print("models:", models)
kl = root / "models" / "kimi_linear"
for f in kl.glob("*.py"):
    shutil.copy(f, out / f.name)
for extra in ["conversion_mapping.py"]:
    p = root / extra
    if p.exists():
        shutil.copy(p, out / extra)
from transformers import KimiLinearConfig, KimiLinearForCausalLM
cfg = KimiLinearConfig()
print("default config:", cfg.to_json_string()[:6000])
