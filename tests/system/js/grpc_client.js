// SPDX-License-Identifier: Apache-2.0
// Node's @grpc/grpc-js (an implementation nobody here wrote) against a real sluiced, one scenario
// per run: node grpc_client.js <addr> <scenario>. Prints one JSON object with what it saw; the
// assertions are tests/system/test_grpc_js.py's. Messages are encoded with protobufjs (grpc-js's
// own dependency) from proto/, so nothing here is generated.
"use strict";
const path = require("path");
const grpc = require("@grpc/grpc-js");
const protobuf = require("protobufjs");

const [addr, scenario] = process.argv.slice(2);
const root = protobuf.loadSync(path.join(__dirname, "..", "..", "..", "proto", "gubernator.proto"));
const Req = root.lookupType("pb.gubernator.GetRateLimitsReq");
const Resp = root.lookupType("pb.gubernator.GetRateLimitsResp");
const enc = (T) => (o) => Buffer.from(T.encode(T.fromObject(o)).finish());
const dec = (T) => (b) => T.toObject(T.decode(b), { longs: Number, enums: String });

function client(opts) {
  return new grpc.Client(addr, grpc.credentials.createInsecure(), opts || {});
}

function item(key, hits) {
  return { name: "js", uniqueKey: key, hits: hits, limit: 10, duration: 60000 };
}

function getRateLimits(c, key, hits, options) {
  return new Promise((resolve) => {
    c.makeUnaryRequest("/pb.gubernator.V1/GetRateLimits", enc(Req), dec(Resp),
      { requests: [item(key, hits)] }, new grpc.Metadata(), options || {},
      (err, r) => resolve(err ? { code: err.code, details: err.details }
                              : { code: 0, remaining: r.responses[0].remaining || 0,
                                  error: r.responses[0].error || "" }));
  });
}

// HealthCheckRequest{service=1} / HealthCheckResponse{status=1}, by hand
const healthReq = (s) => s ? Buffer.concat([Buffer.from([0x0a, s.length]), Buffer.from(s)])
                           : Buffer.alloc(0);
const healthResp = (b) => (b.length >= 2 && b[0] === 0x08 ? b[1] : 0);

async function main() {
  const out = {};
  if (scenario === "gzip") {
    // a channel that compresses every message (grpc.default_compression_algorithm 2 = gzip)
    const c = client({ "grpc.default_compression_algorithm": 2 });
    out.calls = [];
    for (let i = 0; i < 3; i++)
      out.calls.push(await getRateLimits(c, "gz", 1, { deadline: Date.now() + 5000 }));
    c.close();
  } else if (scenario === "expired") {
    const c = client();
    // the channel connected first, so that the expired call is sent rather than failed while
    // resolving the name (grpc-js sends it with grpc-timeout: 1n)
    out.warm = await getRateLimits(c, "warm", 1, { deadline: Date.now() + 5000 });
    out.expired = await getRateLimits(c, "late", 1, { deadline: Date.now() - 1000 });
    out.after = await getRateLimits(c, "late", 0, { deadline: Date.now() + 5000 });
    c.close();
  } else if (scenario === "unknown") {
    // a bidirectional stream the client never half-closes: the answer must come from the headers
    const c = client();
    const t0 = Date.now();
    await new Promise((resolve) => {
      const call = c.makeBidiStreamRequest("/pb.gubernator.V1/NoSuchMethod", (x) => x, (x) => x,
                                           new grpc.Metadata(), { deadline: Date.now() + 15000 });
      call.on("data", () => {});
      call.on("error", (e) => { out.code = e.code; out.details = e.details; resolve(); });
      call.on("end", resolve);
      call.write(Buffer.alloc(0));
    });
    out.ms = Date.now() - t0;
    out.after = await getRateLimits(c, "same-channel", 0, { deadline: Date.now() + 5000 });
    c.close();
  } else if (scenario === "health") {
    const c = client();
    const check = (s) => new Promise((resolve) => c.makeUnaryRequest(
      "/grpc.health.v1.Health/Check", healthReq, healthResp, s, new grpc.Metadata(),
      { deadline: Date.now() + 5000 }, (err, r) => resolve(err ? { code: err.code } : { status: r })));
    out.overall = await check("");
    out.v1 = await check("pb.gubernator.V1");
    out.unknown = await check("no.such.Service");
    out.watch = await new Promise((resolve) => {
      const call = c.makeServerStreamRequest("/grpc.health.v1.Health/Watch", healthReq, healthResp,
                                             "", new grpc.Metadata(), {});
      call.on("data", (r) => { resolve(r); call.cancel(); });
      call.on("error", () => {});
    });
    c.close();
  } else if (scenario === "reflection") {
    const c = client();
    out.services = await new Promise((resolve, reject) => {
      const call = c.makeBidiStreamRequest(
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", (x) => x, (x) => x,
        new grpc.Metadata(), { deadline: Date.now() + 10000 });
      call.on("data", (b) => {
        // ServerReflectionResponse.list_services_response (6) -> ServiceResponse (1) -> name (1)
        const r = protobuf.Reader.create(b);
        const names = [];
        while (r.pos < r.len) {
          const tag = r.uint32();
          if (tag >>> 3 !== 6) { r.skipType(tag & 7); continue; }
          const lr = protobuf.Reader.create(r.bytes());
          while (lr.pos < lr.len) {
            const t2 = lr.uint32();
            if (t2 >>> 3 !== 1) { lr.skipType(t2 & 7); continue; }
            const sr = protobuf.Reader.create(lr.bytes());
            while (sr.pos < sr.len) {
              const t3 = sr.uint32();
              if (t3 >>> 3 === 1) names.push(sr.string()); else sr.skipType(t3 & 7);
            }
          }
        }
        resolve(names);
        call.end();
      });
      call.on("error", reject);
      call.write(Buffer.from([0x3a, 0x01, 0x2a])); // list_services: "*" (the stream stays open)
    });
    c.close();
  } else {
    throw new Error("unknown scenario " + scenario);
  }
  process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch((e) => { process.stdout.write(JSON.stringify({ crash: String(e) }) + "\n"); process.exit(1); });
