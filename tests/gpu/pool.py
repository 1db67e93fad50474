#!/usr/bin/env python3
"""A loopback "pool" for real_gpu_check.sh: accepts on 127.0.0.1:PORT for SECONDS, answers nothing."""
import socket
import sys
import time

server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", int(sys.argv[1])))
server.listen(8)
server.settimeout(1)
connections, end = [], time.time() + float(sys.argv[2])
while time.time() < end:
    try:
        connections.append(server.accept()[0])
    except socket.timeout:
        pass
