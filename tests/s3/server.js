// SPDX-License-Identifier: Apache-2.0
/*
 * server.js - the S3-compatible server of the s3:// tests: @20minutes/s3rver
 * (pinned in tests/s3/package.json, installed by `make deps` into
 * build/s3rver; the package has no bin/) on 127.0.0.1, with one key pair
 * and one bucket, checking AWS Signature V4 on every signed request.
 *
 * Usage: FL_S3_SECRET=SECRET node server.js PORT DIR KEY_ID BUCKET [LOG]
 * (the secret by environment, not in argv where ps shows it).  Prints
 * "listening PORT" once it accepts; exits on SIGTERM or when stdin closes,
 * so a test that dies takes the server with it.  LOG gets a line per
 * request: "METHOD PATH STATUS RANGE AUTH SIGNED_HEADERS TOKEN", AUTH
 * being sigv4, presigned or none, RANGE and SIGNED_HEADERS "-" if none,
 * TOKEN "token" if x-amz-security-token came, else "-": what the tests
 * check of faultline's requests beside the server's own checks.
 *
 * What it does not check (docs/object-storage.md): unsigned requests are
 * served, the payload hash is not compared with the body, and a suffix
 * range (bytes=-N) is answered wrongly; the tests cover those otherwise.
 */
'use strict';

const S3rver = require('@20minutes/s3rver');
const AWSAccount = require('@20minutes/s3rver/lib/models/account');

const fs = require('node:fs');

const [port, dir, keyId, bucket, log] = process.argv.slice(2);
const secret = process.env.FL_S3_SECRET;

if (!port || !dir || !keyId || !bucket || !secret) {
	console.error('usage: FL_S3_SECRET=SECRET node server.js PORT DIR KEY_ID BUCKET');
	process.exit(2);
}

/* Only this key pair: the package's built-in S3RVER/S3RVER is revoked. */
AWSAccount.DUMMY_ACCOUNT.revokeAccessKey('S3RVER');
new AWSAccount(123456789012, 'faultline-test').createKeyPair(keyId, secret);

const server = new S3rver({
	address: '127.0.0.1',
	port: Number(port),
	directory: dir,
	silent: !process.env.FL_S3_VERBOSE,
	vhostBuckets: false,
	configureBuckets: [{ name: bucket }],
});

/* Outermost, so it sees every request and the status of S3's errors. */
function accessLog(ctx, status) {
	const auth = ctx.get('authorization');
	const m = /SignedHeaders=([^,\s]+)/.exec(auth);
	const kind = auth.startsWith('AWS4-HMAC-SHA256 ') ? 'sigv4' :
		'X-Amz-Signature' in ctx.query ? 'presigned' : 'none';

	fs.appendFileSync(log, [ctx.method, ctx.path, status,
		ctx.get('range') || '-', kind, m ? m[1] : '-',
		ctx.get('x-amz-security-token') ? 'token' : '-'].join(' ') + '\n');
}

if (log) {
	server.middleware.unshift(async (ctx, next) => {
		try {
			await next();
			accessLog(ctx, ctx.status);
		} catch (err) {
			accessLog(ctx, err.status || 500);
			throw err;
		}
	});
}

server.run().then((addr) => {
	console.log(`listening ${addr.port}`);
}, (err) => {
	console.error(`s3rver: ${err.message}`);
	process.exit(1);
});

const stop = () => server.close().finally(() => process.exit(0));

process.on('SIGTERM', stop);
process.on('SIGINT', stop);
process.stdin.on('end', stop);
process.stdin.on('error', stop);
process.stdin.resume();
