// Synthetic pictures for the image tests: RGB PNGs whose pixels follow a seed, as data URLs.
import zlib from 'node:zlib';

// An RGB PNG (8-bit, no filter) of w x h whose pixels follow `seed`.
export function png(w, h, seed) {
  const rows = [];
  for (let y = 0; y < h; y++) {
    const row = Buffer.alloc(1 + 3 * w);
    for (let x = 0; x < w; x++) {
      row[1 + 3 * x] = (x * 7 + seed * 31) & 255;
      row[2 + 3 * x] = (y * 5 + seed * 17) & 255;
      row[3 + 3 * x] = ((x ^ y) + seed * 53) & 255;
    }
    rows.push(row);
  }
  const chunk = (type, data) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type), data]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(zlib.crc32(body));
    return Buffer.concat([len, body, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr.set([8, 2, 0, 0, 0], 8);
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk('IHDR', ihdr),
    chunk('IDAT', zlib.deflateSync(Buffer.concat(rows))), chunk('IEND', Buffer.alloc(0))]);
}
export const dataUrl = (buf) => `data:image/png;base64,${buf.toString('base64')}`;
