// SPDX-License-Identifier: Apache-2.0
/*
 * presign.js - a presigned GET URL (AWS Signature V4, query string), as
 * an SDK's presigner makes it, for the tests' presigned https://-style
 * URLs against tests/s3/server.js.  Node's crypto only.
 *
 * Usage: FL_S3_SECRET=SECRET node presign.js URL KEY_ID REGION EXPIRES [AGE]
 * prints the URL signed for EXPIRES seconds from AGE seconds ago (0).
 */
'use strict';

const { createHash, createHmac } = require('node:crypto');

const [url, keyId, region, expires, age] = process.argv.slice(2);
const secret = process.env.FL_S3_SECRET;
const u = new URL(url);
const when = new Date(Date.now() - 1000 * Number(age || 0));
const stamp = when.toISOString().replace(/[-:]/g, '').replace(/\.\d+/, '');
const day = stamp.slice(0, 8);
const scope = `${day}/${region}/s3/aws4_request`;
const enc = (s) => encodeURIComponent(s).replace(/[!'()*]/g,
	(c) => '%' + c.charCodeAt(0).toString(16).toUpperCase());
const query = {
	'X-Amz-Algorithm': 'AWS4-HMAC-SHA256',
	'X-Amz-Credential': `${keyId}/${scope}`,
	'X-Amz-Date': stamp,
	'X-Amz-Expires': expires,
	'X-Amz-SignedHeaders': 'host',
};
const qs = Object.keys(query).sort().map((k) => `${enc(k)}=${enc(query[k])}`)
	.join('&');
const canonical = ['GET', u.pathname, qs, `host:${u.host}\n`, 'host',
	'UNSIGNED-PAYLOAD'].join('\n');
const toSign = ['AWS4-HMAC-SHA256', stamp, scope,
	createHash('sha256').update(canonical).digest('hex')].join('\n');
const hmac = (k, d) => createHmac('sha256', k).update(d).digest();
let key = hmac(`AWS4${secret}`, day);

for (const part of [region, 's3', 'aws4_request'])
	key = hmac(key, part);
console.log(`${u.origin}${u.pathname}?${qs}&X-Amz-Signature=` +
	createHmac('sha256', key).update(toSign).digest('hex'));
