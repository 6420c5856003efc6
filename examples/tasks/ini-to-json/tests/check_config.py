import json

expected = {
    "server": {"host": "0.0.0.0", "port": 8080, "debug": False},
    "database": {"url": "postgres://db:5432/app", "pool_size": 10, "ssl": True, "timeout": "2.5"},
}
with open("/app/config.json") as f:
    got = json.load(f)
assert got == expected, f"{got} != {expected}"
assert type(got["server"]["port"]) is int and type(got["server"]["debug"]) is bool
print("config correct")
