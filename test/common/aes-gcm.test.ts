import assert from 'node:assert/strict';
import { createDecipheriv, randomBytes } from 'node:crypto';
import { GCM_NONCE_BYTES, GCM_TAG_BYTES, gcmOpen, gcmSeal, type GcmSealed } from '../../common/crypto/aes-gcm';

const hex = (text: string) => Buffer.from(text, 'hex');

describe('AES-256-GCM (seal, open)', () => {
  const key = randomBytes(32);
  const aad = Buffer.from('webhook-registration:r1');
  const plaintext = Buffer.from('whsec_plaintext');

  it('opens the GCM specification’s AES-256 test case 16 (96-bit IV, additional data)', () => {
    const sealed: GcmSealed = {
      nonce: hex('cafebabefacedbaddecaf888'),
      ciphertext: hex(
        '522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662',
      ),
      tag: hex('76fc6ece0f4e1768cddf8853bb2d551b'),
    };
    const opened = gcmOpen(
      hex('feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308'),
      sealed,
      hex('feedfacedeadbeeffeedfacedeadbeefabaddad2'),
    );
    assert.deepEqual(
      opened,
      hex(
        'd9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39',
      ),
    );
  });

  it('seals with a fresh 12-byte nonce and a 16-byte tag, as any AES-256-GCM reader opens it', () => {
    const a = gcmSeal(key, plaintext, aad);
    const b = gcmSeal(key, plaintext, aad);
    assert.equal(GCM_NONCE_BYTES, 12);
    assert.equal(GCM_TAG_BYTES, 16);
    assert.equal(a.nonce.length, 12);
    assert.equal(a.tag.length, 16);
    assert.equal(a.ciphertext.length, plaintext.length);
    assert.notDeepEqual(a.nonce, b.nonce);
    assert.notDeepEqual(a.ciphertext, plaintext);
    const decipher = createDecipheriv('aes-256-gcm', key, a.nonce);
    decipher.setAAD(aad);
    decipher.setAuthTag(a.tag);
    assert.deepEqual(Buffer.concat([decipher.update(a.ciphertext), decipher.final()]), plaintext);
    assert.deepEqual(gcmOpen(key, b, aad), plaintext);
  });

  it('seals and opens empty plaintext', () => {
    assert.deepEqual(gcmOpen(key, gcmSeal(key, Buffer.alloc(0), aad), aad), Buffer.alloc(0));
  });

  it('refuses another key, other additional data, an altered nonce, ciphertext or tag', () => {
    const sealed = gcmSeal(key, plaintext, aad);
    const flip = (bytes: Buffer) => Buffer.from(bytes.map((byte, i) => (i === 0 ? byte ^ 1 : byte)));
    assert.throws(() => gcmOpen(randomBytes(32), sealed, aad), /unable to authenticate/);
    assert.throws(() => gcmOpen(key, sealed, Buffer.from('webhook-registration:r2')), /unable to authenticate/);
    assert.throws(() => gcmOpen(key, sealed, Buffer.alloc(0)), /unable to authenticate/);
    assert.throws(() => gcmOpen(key, { ...sealed, nonce: flip(sealed.nonce) }, aad), /unable to authenticate/);
    assert.throws(
      () => gcmOpen(key, { ...sealed, ciphertext: flip(sealed.ciphertext) }, aad),
      /unable to authenticate/,
    );
    assert.throws(() => gcmOpen(key, { ...sealed, tag: flip(sealed.tag) }, aad), /unable to authenticate/);
  });

  it('refuses a tag shorter than 16 bytes, which GCM alone would check only in part', () => {
    const sealed = gcmSeal(key, plaintext, aad);
    for (const length of [4, 8, 12, 15])
      assert.throws(
        () => gcmOpen(key, { ...sealed, tag: sealed.tag.subarray(0, length) }, aad),
        /Invalid authentication tag length/,
      );
  });
});
