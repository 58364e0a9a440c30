#!/usr/bin/env sh
# Talk to a running `dpllm serve` with curl. Set KEY (and ADMIN_KEY) to keys whose hashes
# are in dpllm.toml ([[server.keys]]; make them with `dpllm serve hash-key --new`).
set -eu
URL=${URL:-http://127.0.0.1:8000}
: "${KEY:?set KEY to your dpllm API key}"
auth="Authorization: Bearer $KEY"

curl -s "$URL/healthz"; echo
curl -s "$URL/v1/chat/completions" -H "$auth" -H 'Content-Type: application/json' \
  -d '{"messages": [{"role": "user", "content": "Hi, I am Emily Clark (13987654321)."}]}'; echo
curl -sN "$URL/v1/chat/completions" -H "$auth" -H 'Content-Type: application/json' \
  -d '{"stream": true, "messages": [{"role": "user", "content": "Say hello."}]}'; echo
curl -s "$URL/v1/stats/mean_rating?week=2026-W47" -H "$auth"; echo
curl -s "$URL/v1/budget?week=2026-W47" -H "$auth"; echo
if [ -n "${ADMIN_KEY:-}" ]; then
  curl -s "$URL/v1/admin/pending" -H "Authorization: Bearer $ADMIN_KEY"; echo
fi
