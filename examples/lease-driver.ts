// lease-driver.ts: the lease protocol of docs/leases.md in TypeScript, with
// Node's built-in modules only (no npm package), spoken to the Docker Engine
// API over its unix socket. No sandboxctl needed. The same commands as
// lease-driver.sh:
//
//   take BOX [TTL_SECONDS]               takes a lease; prints its volume's name
//   renew BOX PREVIOUS [TTL_SECONDS]     takes the next lease, then removes PREVIOUS
//   release BOX                          removes every lease volume of BOX
//   hold BOX TTL_SECONDS -- COMMAND...   holds BOX while COMMAND runs (renews every
//                                        ttl/3, releases when it ends, exits with its status)
//
// Run it as it is with a Node that strips types (`node examples/lease-driver.ts
// ...` on Node 22.18 or 23.6 and later; 22.6 and later with
// --experimental-strip-types), or compile it first (`tsc --strict --module
// commonjs --target es2020 examples/lease-driver.ts`, with @types/node) and run
// the .js. It uses only erasable TypeScript (types, interfaces, `as`). In a
// driver, take(), remove(), release() and hold() are the protocol: copy them.
//
// Environment: DOCKER_SOCK (default /var/run/docker.sock); SCOPE_LABELS, the
// state file's scope labels as space-separated KEY=VALUE (a lease must carry
// every one, or sandboxctl never lists it).

import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { request } from "node:http";
import { constants } from "node:os";

const SOCK = process.env.DOCKER_SOCK ?? "/var/run/docker.sock";
const SANDBOX = "ca.sandbox";
const BOX_ID = "ca.sandbox.id";
const LEASE_TTL = "ca.sandbox.lease.ttl";

type Labels = Record<string, string>;
interface Reply {
  status: number;
  body: string;
}
interface Volume {
  Name: string;
  CreatedAt?: string;
  Labels?: Labels | null;
}

const message = (e: unknown): string => (e instanceof Error ? e.message : String(e));
const warn = (text: string): void => console.error(`lease-driver: ${text}`);
const sleep = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms));

/** The state file's scope labels, from SCOPE_LABELS="KEY=VALUE ...". */
function scope(): Labels {
  const labels: Labels = {};
  for (const pair of (process.env.SCOPE_LABELS ?? "").split(" ")) {
    const eq = pair.indexOf("=");
    if (eq > 0) labels[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return labels;
}

/** One Engine API call. Paths carry no API version: the engine's own is used. */
function api(method: string, path: string, body?: unknown): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const headers: Record<string, string | number> =
      data === undefined ? {} : { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(data) };
    const req = request({ socketPath: SOCK, method, path, headers, timeout: 30_000 }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        text += chunk;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on("timeout", () => req.destroy(new Error(`${method} ${path}: no answer in 30 s`)));
    req.on("error", reject);
    req.end(data);
  });
}

/** True if `have` carries every label of `want` with exactly its value. */
function carries(have: Labels | null | undefined, want: Labels): boolean {
  return Object.entries(want).every(([key, value]) => have?.[key] === value);
}

/** Creates the next lease volume of `box`, holding for `ttlSeconds` from its
 *  engine-stamped creation; returns its name. */
async function take(box: string, ttlSeconds: number): Promise<string> {
  if (!Number.isInteger(ttlSeconds) || ttlSeconds <= 0) {
    throw new Error(`ttl must be whole seconds over 0, not ${ttlSeconds}`);
  }
  const labels: Labels = { ...scope(), [SANDBOX]: "1", [BOX_ID]: box, [LEASE_TTL]: `${ttlSeconds}s` };
  // A new name every time: Docker answers an existing name with that volume unchanged.
  const name = `ca-sbx-lease-${box}-${Math.floor(Date.now() / 1000)}${randomBytes(4).toString("hex")}`;
  const r = await api("POST", "/volumes/create", { Name: name, Labels: labels });
  if (r.status !== 201) throw new Error(`create volume ${name}: HTTP ${r.status}: ${r.body.trim()}`);
  const volume = JSON.parse(r.body) as Volume;
  if (!carries(volume.Labels, labels)) throw new Error(`volume ${name} came back without the lease labels`);
  return name;
}

/** Removes one volume; a 404 means already gone, which is fine. */
async function remove(name: string): Promise<void> {
  const r = await api("DELETE", `/volumes/${encodeURIComponent(name)}`);
  if (r.status !== 204 && r.status !== 404) {
    throw new Error(`remove volume ${name}: HTTP ${r.status}: ${r.body.trim()}`);
  }
}

/** Removes every lease volume of `box` (in this scope). */
async function release(box: string): Promise<void> {
  const want: Labels = { ...scope(), [SANDBOX]: "1", [BOX_ID]: box };
  const filters = { label: [...Object.entries(want).map(([k, v]) => `${k}=${v}`), LEASE_TTL] };
  const r = await api("GET", `/volumes?filters=${encodeURIComponent(JSON.stringify(filters))}`);
  if (r.status !== 200) throw new Error(`list volumes: HTTP ${r.status}: ${r.body.trim()}`);
  const list = JSON.parse(r.body) as { Volumes?: Volume[] | null };
  for (const volume of list.Volumes ?? []) {
    // Checked again here: Podman ORs several label filters on this listing.
    if (volume.Labels != null && LEASE_TTL in volume.Labels && carries(volume.Labels, want)) {
      await remove(volume.Name);
    }
  }
}

/** Takes a lease of `box`, runs `command`, renews every ttl/3 while it runs
 *  (a failed renewal is said on stderr and tried again after 5 s, or ttl/3
 *  if shorter), releases when it ends and returns its exit status. Never
 *  kills the command. */
async function hold(box: string, ttlSeconds: number, command: string[]): Promise<number> {
  let lease = await take(box, ttlSeconds);
  const period = Math.max(1, Math.floor(ttlSeconds / 3)) * 1000;
  process.on("SIGINT", () => {}); // Ctrl-C reaches the command; this driver goes on to release
  const child = spawn(command[0], command.slice(1), { stdio: "inherit" });
  const ended = new Promise<number>((resolve) => {
    child.on("error", (e) => {
      warn(`${command[0]}: ${e.message}`);
      resolve(127);
    });
    child.on("exit", (code, signal) => resolve(code ?? 128 + (signal ? constants.signals[signal] : 0)));
  });
  const renewing = (async () => {
    let wait = period;
    for (;;) {
      const due = await Promise.race([sleep(wait).then(() => true), ended.then(() => false)]);
      if (!due) return;
      try {
        const next = await take(box, ttlSeconds);
        await remove(lease).catch((e) => warn(`could not remove the older lease ${lease} (it runs out by itself): ${message(e)}`));
        lease = next;
        wait = period;
      } catch (e) {
        wait = Math.min(period, 5000);
        warn(`renewing the lease of box ${box} failed: ${message(e)}; trying again in ${wait / 1000}s`);
      }
    }
  })();
  const status = await ended;
  await renewing; // a renewal in flight finishes before the release
  await release(box).catch((e) => warn(`could not release box ${box} (its lease runs out by itself): ${message(e)}`));
  return status;
}

async function main(args: string[]): Promise<number> {
  const [cmd, box, ...rest] = args;
  const seconds = (text: string | undefined): number => (text === undefined ? 900 : Number(text));
  if (cmd === "take" && box !== undefined && rest.length <= 1) {
    console.log(await take(box, seconds(rest[0])));
  } else if (cmd === "renew" && box !== undefined && (rest.length === 1 || rest.length === 2)) {
    const next = await take(box, seconds(rest[1]));
    await remove(rest[0]);
    console.log(next);
  } else if (cmd === "release" && box !== undefined && rest.length === 0) {
    await release(box);
  } else if (cmd === "hold" && box !== undefined && rest.length >= 3 && rest[1] === "--") {
    return hold(box, seconds(rest[0]), rest.slice(2));
  } else {
    warn("usage: lease-driver.ts take|renew|release|hold ... (see the top of this file)");
    return 2;
  }
  return 0;
}

main(process.argv.slice(2)).then(
  (status) => process.exit(status),
  (e) => {
    warn(message(e));
    process.exit(1);
  },
);
