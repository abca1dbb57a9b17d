"""Forward several TCP ports to one: pinned load ports in front of SQL Server on Linux.

SQL Server on Linux listens on one port. The record runs gave each load stream its own
port; in the docker-compose stack this forwarder listens on a range of ports and relays
each connection to the server, so every stream's connection really uses its own port.

    python port_forward.py --listen 2000-2003 --to mssql:1433 [--bind 0.0.0.0]
"""
from __future__ import annotations

import argparse
import asyncio
import logging

log = logging.getLogger("port_forward")


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


def handler(host: str, port: int, listen_port: int):
    async def handle(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            server_reader, server_writer = await asyncio.open_connection(host, port)
        except OSError as exc:
            log.warning("port %d: cannot reach %s:%d: %s", listen_port, host, port, exc)
            client_writer.close()
            return
        await asyncio.gather(_pipe(client_reader, server_writer), _pipe(server_reader, client_writer))
    return handle


def port_range(text: str) -> list[int]:
    first, _, last = text.partition("-")
    ports = list(range(int(first), int(last or first) + 1))
    if not ports or not all(0 < p < 65536 for p in ports):
        raise argparse.ArgumentTypeError(f"{text!r} is not a port or a range of ports")
    return ports


async def serve(bind: str, ports: list[int], host: str, port: int) -> list[asyncio.base_events.Server]:
    return [await asyncio.start_server(handler(host, port, p), bind, p) for p in ports]


async def main_async(args: argparse.Namespace) -> None:
    host, _, port = args.to.rpartition(":")
    servers = await serve(args.bind, args.listen, host, int(port))
    log.info("forwarding %s:%s to %s", args.bind, ",".join(map(str, args.listen)), args.to)
    await asyncio.gather(*(s.serve_forever() for s in servers))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", type=port_range, required=True, help="a port or a range, e.g. 2000-2003")
    parser.add_argument("--to", required=True, help="host:port of the server")
    parser.add_argument("--bind", default="0.0.0.0")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
