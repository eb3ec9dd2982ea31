# Starts kt-serve (argv[1:]) on a free port, sends one completion, stops it with
# SIGINT and waits: for lit tests of what kt-serve does at exit.
import json, re, signal, subprocess, sys, urllib.request

p = subprocess.Popen(sys.argv[1:] + ["--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
line = p.stdout.readline()
port = re.search(r"http://[^:]+:(\d+)", line).group(1)
req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions",
                             data=json.dumps({"prompt": "Hello there", "max_tokens": 5, "temperature": 0}).encode(),
                             headers={"Content-Type": "application/json"})
body = json.load(urllib.request.urlopen(req, timeout=60))
print("completion tokens", body["usage"]["completion_tokens"], "prompt tokens", body["usage"]["prompt_tokens"])
p.send_signal(signal.SIGINT)
print(p.communicate(timeout=60)[0], end="")
print("exit", p.returncode)
