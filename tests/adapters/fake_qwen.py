"""The start of a fake Qwen Code: one chat completions request with the profile's variables."""

QWEN_ASK = """
import json, os, sys, urllib.error, urllib.request
def ask(model):
    body = {"model": model, "messages": [{"role": "user", "content": sys.argv[-1]}]}
    req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions",
        json.dumps(body).encode(), method="POST", headers={"content-type": "application/json",
        "authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
    try:
        return urllib.request.urlopen(req, timeout=10)
    except urllib.error.HTTPError as exc:
        return exc
"""
