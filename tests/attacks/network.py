"""Reach the network: the grader's machine (a TCP listener on 127.0.0.1 and a Unix socket the
test opened), and the outside world."""
# %%
import json
import socket

targets = json.load(open("targets.json"))
reached = []
for addr in [("127.0.0.1", targets["tcp_port"]), ("1.1.1.1", 53), ("8.8.8.8", 443)]:
    try:
        socket.create_connection(addr, timeout=2).sendall(b"leak")
        reached.append(addr)
    except OSError as e:
        print(addr, e)
try:
    s = socket.socket(socket.AF_UNIX)
    s.connect(targets["unix_socket"])
    s.sendall(b"leak")
    reached.append(targets["unix_socket"])
except OSError as e:
    print("unix", e)
print("reached", reached)
