// Unit tests of the vision room: token plans and spans, resampling properties, decoding of each
// format (and its failures), limits checked before decoding, EXIF transposes, sources, keys.
#include <png.h>
#include <jpeglib.h>
#include <webp/encode.h>

#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "vision/decode.h"
#include "vision/plan.h"
#include "vision/preprocess.h"
#include "vision/resample.h"
#include "vision/source.h"

namespace flashserve::vision {
namespace {

RgbImage Gradient(int w, int h) {
  RgbImage img(w, h);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      uint8_t* px = img.Row(y) + x * 3;
      px[0] = static_cast<uint8_t>(x * 255 / std::max(1, w - 1));
      px[1] = static_cast<uint8_t>(y * 255 / std::max(1, h - 1));
      px[2] = static_cast<uint8_t>((x * 7 + y * 13) % 256);
    }
  return img;
}

void WriteToVector(png_structp png, png_bytep data, size_t n) {
  auto* out = static_cast<std::vector<uint8_t>*>(png_get_io_ptr(png));
  out->insert(out->end(), data, data + n);
}

std::vector<uint8_t> EncodePng(const RgbImage& img) {
  std::vector<uint8_t> out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  png_set_write_fn(png, &out, WriteToVector, nullptr);
  png_set_IHDR(png, info, img.width, img.height, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < img.height; ++y) png_write_row(png, const_cast<uint8_t*>(img.Row(y)));
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

std::vector<uint8_t> EncodeJpeg(const RgbImage& img) {
  jpeg_compress_struct c{};
  jpeg_error_mgr err{};
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buf, &size);
  c.image_width = img.width;
  c.image_height = img.height;
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 95, TRUE);
  jpeg_start_compress(&c, TRUE);
  for (int y = 0; y < img.height; ++y) {
    JSAMPROW row = const_cast<uint8_t*>(img.Row(y));
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  std::vector<uint8_t> out(buf, buf + size);
  jpeg_destroy_compress(&c);
  free(buf);
  return out;
}

TEST(Plan, ReleasedExamples) {
  VisionParams v;  // 14 px patches, 3x3 merge, 384 tokens, 147456 min pixels, 8:1
  auto plan = PlanImage(1920, 1080, v);
  ASSERT_TRUE(plan.ok());
  EXPECT_LE(plan->span_tokens, 384);
  EXPECT_EQ(plan->span_tokens, plan->llm_h * (plan->llm_w + 1) + 2);
  EXPECT_EQ(plan->resized_width % 14, 0);
  EXPECT_EQ(plan->resized_height % 14, 0);
  EXPECT_EQ(plan->llm_h, (plan->vit_h + 2) / 3);
  EXPECT_FALSE(plan->stretch);
  // A small picture is upscaled to at least min_pixels before planning.
  auto small = PlanImage(10, 10, v);
  ASSERT_TRUE(small.ok());
  EXPECT_GE(static_cast<int64_t>(small->resized_width) * small->resized_height, 147456);
}

TEST(Plan, ExtremesFitTheBudget) {
  for (SpanLayout layout : {SpanLayout::kV41, SpanLayout::kVisionExp}) {
    VisionParams v;
    v.layout = layout;
    for (auto [w, h] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 1}, {1, 100000}, {100000, 1}, {8, 1}, {800, 100}, {801, 100}, {7919, 7907}, {65535, 65535}}) {
      auto plan = PlanImage(w, h, v);
      ASSERT_TRUE(plan.ok()) << w << "x" << h << ": " << plan.error().ToString();
      EXPECT_LE(plan->span_tokens + (layout == SpanLayout::kVisionExp ? 3 : 0), 384) << w << "x" << h;
      EXPECT_GT(plan->llm_h, 0);
      EXPECT_GT(plan->llm_w, 0);
      const ImageSpan span = BuildSpan(*plan, layout, 3);  // start 3: no compressor pad
      EXPECT_EQ(static_cast<int>(span.roles.size()), plan->span_tokens) << w << "x" << h;
      EXPECT_EQ(static_cast<int>(span.image_rows.size()), plan->llm_h * plan->llm_w);
    }
  }
  EXPECT_TRUE(PlanImage(800, 100, VisionParams{})->stretch);   // exactly 8:1 is stretched
  EXPECT_FALSE(PlanImage(799, 100, VisionParams{})->stretch);
  EXPECT_FALSE(PlanImage(0, 10, VisionParams{}).ok());
}

TEST(Plan, V41SpanIsReadingOrder) {
  ImagePlan plan;
  plan.llm_h = 2;
  plan.llm_w = 3;
  const ImageSpan span = BuildSpan(plan, SpanLayout::kV41, 0);
  using R = SpanRole;
  EXPECT_EQ(span.roles, (std::vector<R>{R::kStart, R::kImage, R::kImage, R::kImage, R::kNewline, R::kImage,
                                         R::kImage, R::kImage, R::kNewline, R::kEnd}));
  EXPECT_EQ(span.image_rows, (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
}

TEST(Plan, VisionExpSpanPairsRowsAndPadsToGroups) {
  ImagePlan plan;
  plan.llm_h = 3;
  plan.llm_w = 2;
  const ImageSpan span = BuildSpan(plan, SpanLayout::kVisionExp, 0);  // 3 pads before START
  using R = SpanRole;
  // rows padded to 4; pairs (0,1) and (2,pad) read column by column; row_len 3, 2 pairs -> no pad_last.
  EXPECT_EQ(span.roles,
            (std::vector<R>{R::kPad, R::kPad, R::kPad, R::kStart, R::kImage, R::kImage, R::kImage, R::kImage,
                            R::kNewline, R::kNewline, R::kImage, R::kPad, R::kImage, R::kPad, R::kNewline, R::kPad,
                            R::kEnd}));
  EXPECT_EQ(span.image_rows, (std::vector<int32_t>{0, 2, 1, 3, 4, 5}));
}

TEST(Resample, IdentityAndConstantColour) {
  const RgbImage img = Gradient(37, 23);
  EXPECT_EQ(ResizeBicubic(img, 37, 23).pixels, img.pixels);
  RgbImage flat(50, 40);
  std::memset(flat.pixels.data(), 200, flat.pixels.size());
  for (auto [w, h] : std::vector<std::pair<int, int>>{{13, 7}, {200, 3}, {1, 1}, {50, 97}}) {
    const RgbImage out = ResizeBicubic(flat, w, h);
    ASSERT_EQ(out.width, w);
    for (uint8_t v : out.pixels) ASSERT_EQ(v, 200) << w << "x" << h;
  }
}

TEST(Resample, PadCentresOnGray) {
  const RgbImage img = Gradient(20, 10);
  const RgbImage out = PadTo(img, 20, 20, 127);
  ASSERT_EQ(out.height, 20);
  EXPECT_EQ(out.Row(0)[0], 127);                        // top band
  EXPECT_EQ(out.Row(19)[59], 127);                      // bottom band
  EXPECT_EQ(std::memcmp(out.Row(5), img.Row(0), 60), 0);  // the picture itself, unscaled, at row 5
}

TEST(Resample, OrientationsAreTheEightTransposes) {
  const RgbImage img = Gradient(3, 2);
  auto at = [](const RgbImage& i, int x, int y) { return std::vector<uint8_t>(i.Row(y) + x * 3, i.Row(y) + x * 3 + 3); };
  EXPECT_EQ(at(ApplyOrientation(img, 2), 0, 0), at(img, 2, 0));
  EXPECT_EQ(at(ApplyOrientation(img, 3), 0, 0), at(img, 2, 1));
  EXPECT_EQ(at(ApplyOrientation(img, 4), 0, 0), at(img, 0, 1));
  const RgbImage r6 = ApplyOrientation(img, 6);  // 90 degrees clockwise: bottom-left comes first
  EXPECT_EQ(r6.width, 2);
  EXPECT_EQ(at(r6, 0, 0), at(img, 0, 1));
  EXPECT_EQ(at(ApplyOrientation(img, 8), 0, 0), at(img, 2, 0));
  EXPECT_EQ(at(ApplyOrientation(img, 5), 1, 0), at(img, 0, 1));
  EXPECT_EQ(at(ApplyOrientation(img, 7), 0, 0), at(img, 2, 1));
  EXPECT_EQ(ApplyOrientation(img, 1).pixels, img.pixels);
}

TEST(Decode, PngRoundTripsExactly) {
  const RgbImage img = Gradient(33, 17);
  const std::vector<uint8_t> png = EncodePng(img);
  auto header = ProbeImage(png);
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->format, ImageFormat::kPng);
  EXPECT_EQ(header->width, 33);
  auto decoded = DecodeImage(png, {});
  ASSERT_TRUE(decoded.ok()) << decoded.error().ToString();
  EXPECT_EQ(decoded->pixels, img.pixels);
}

TEST(Decode, JpegAndWebpDecodeClose) {
  const RgbImage img = Gradient(64, 48);
  uint8_t* webp = nullptr;
  const size_t webp_size = WebPEncodeLosslessRGB(img.pixels.data(), 64, 48, 64 * 3, &webp);
  ASSERT_GT(webp_size, 0u);
  auto lossless = DecodeImage({webp, webp_size}, {});
  WebPFree(webp);
  ASSERT_TRUE(lossless.ok()) << lossless.error().ToString();
  EXPECT_EQ(lossless->pixels, img.pixels);
  RgbImage smooth = img;  // JPEG keeps smooth pictures close
  for (size_t i = 2; i < smooth.pixels.size(); i += 3) smooth.pixels[i] = 90;
  auto jpeg = DecodeImage(EncodeJpeg(smooth), {});
  ASSERT_TRUE(jpeg.ok()) << jpeg.error().ToString();
  int far = 0;
  for (size_t i = 0; i < img.pixels.size(); ++i) far += std::abs(jpeg->pixels[i] - smooth.pixels[i]) > 8;
  EXPECT_LT(far, static_cast<int>(img.pixels.size() / 100));
}

TEST(Decode, CorruptAndTruncatedDataAreErrors) {
  std::vector<uint8_t> png = EncodePng(Gradient(40, 40));
  std::vector<uint8_t> jpeg = EncodeJpeg(Gradient(40, 40));
  std::vector<uint8_t> truncated_png(png.begin(), png.begin() + png.size() / 2);
  EXPECT_FALSE(DecodeImage(truncated_png, {}).ok());
  // libjpeg fills a truncated scan with gray, as Pillow does with LOAD_TRUNCATED_IMAGES: decoded.
  std::vector<uint8_t> truncated_jpeg(jpeg.begin(), jpeg.begin() + jpeg.size() / 2);
  EXPECT_TRUE(DecodeImage(truncated_jpeg, {}).ok());
  const std::string garbage = "definitely not an image";
  auto r = DecodeImage({reinterpret_cast<const uint8_t*>(garbage.data()), garbage.size()}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("PNG, JPEG, WebP, GIF and BMP"), std::string::npos);
  std::vector<uint8_t> bad_png = png;
  bad_png[40] ^= 0xff;  // inside the pixel data: a CRC or zlib error
  EXPECT_FALSE(DecodeImage(bad_png, {}).ok());
  std::vector<uint8_t> header_only(png.begin(), png.begin() + 20);
  EXPECT_FALSE(DecodeImage(header_only, {}).ok());
}

TEST(Decode, LimitsAreCheckedFromTheHeader) {
  // A PNG header claiming 100000 x 100000 pixels with no data: refused before decoding.
  std::vector<uint8_t> png = EncodePng(Gradient(4, 4));
  const uint8_t big[8] = {0, 1, 0x86, 0xa0, 0, 1, 0x86, 0xa0};
  std::memcpy(png.data() + 16, big, 8);
  auto r = DecodeImage(png, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), base::ErrorCode::kResourceExhausted);
  EXPECT_NE(r.error().message().find("100000x100000"), std::string::npos);
  ImageLimits tight;
  tight.max_bytes = 10;
  EXPECT_EQ(DecodeImage(EncodePng(Gradient(4, 4)), tight).error().code(), base::ErrorCode::kResourceExhausted);
}

TEST(Source, DataUrlsAndRefusals) {
  SourcePolicy policy;
  auto ok = LoadImageSource("data:image/png;base64,aGVsbG8=", policy);
  ASSERT_TRUE(ok.ok()) << ok.error().ToString();
  EXPECT_EQ(std::string(ok->begin(), ok->end()), "hello");
  EXPECT_FALSE(LoadImageSource("data:image/png;base64,@@@", policy).ok());
  EXPECT_FALSE(LoadImageSource("data:text/plain;base64,aGVsbG8=", policy).ok());
  auto remote = LoadImageSource("https://example.com/cat.png", policy);
  ASSERT_FALSE(remote.ok());
  EXPECT_NE(remote.error().message().find("data URL"), std::string::npos);
  auto file = LoadImageSource("file:///etc/passwd", policy);
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.error().message().find("--image-file-root"), std::string::npos);
  policy.file_root = "/tmp/flashserve-no-such-root";
  EXPECT_FALSE(LoadImageSource("file:///tmp/flashserve-no-such-root/../../etc/passwd", policy).ok());
  policy.max_bytes = 3;
  EXPECT_EQ(LoadImageSource("data:image/png;base64,aGVsbG8=", policy).error().code(),
            base::ErrorCode::kResourceExhausted);
}

TEST(Source, FileUrlsStayUnderTheRoot) {
  char tmp[] = "/tmp/fs-image-root-XXXXXX";
  ASSERT_NE(mkdtemp(tmp), nullptr);
  const std::filesystem::path dir = tmp;
  struct Cleanup {
    std::filesystem::path dir;
    ~Cleanup() { std::filesystem::remove_all(dir); }
  } cleanup{dir};
  std::filesystem::create_directories(dir / "root");
  std::ofstream(dir / "root" / "cat.png") << "inside";
  std::ofstream(dir / "secret.txt") << "outside";
  std::ofstream(dir / "root2.png") << "sibling";
  std::filesystem::create_symlink(dir / "secret.txt", dir / "root" / "link.png");
  SourcePolicy policy;
  policy.file_root = (dir / "root").string();
  auto inside = LoadImageSource("file://" + (dir / "root" / "cat.png").string(), policy);
  ASSERT_TRUE(inside.ok()) << inside.error().ToString();
  EXPECT_EQ(std::string(inside->begin(), inside->end()), "inside");
  for (const std::string& escape : {(dir / "root" / ".." / "secret.txt").string(),  // an existing file above
                                    (dir / "root" / "link.png").string(),           // a link pointing out
                                    (dir / "root2.png").string(),                   // a name sharing the prefix
                                    std::string("/etc/passwd")}) {
    auto r = LoadImageSource("file://" + escape, policy);
    ASSERT_FALSE(r.ok()) << escape;
    EXPECT_NE(r.error().message().find("outside the directory"), std::string::npos) << r.error().message();
  }
}

TEST(Preprocess, KeysSeparatePicturesAndPatchesAreNormalised) {
  const RgbImage a = Gradient(100, 80);
  RgbImage b = a;
  b.pixels[500] ^= 1;
  VisionParams v;
  auto pa = PrepareImage(a, v, "tower-1");
  auto pb = PrepareImage(b, v, "tower-1");
  ASSERT_TRUE(pa.ok() && pb.ok());
  EXPECT_NE(pa->key, pb->key);
  EXPECT_EQ(pa->key, PrepareImage(a, v, "tower-1")->key);
  EXPECT_NE(pa->key, PrepareImage(a, v, "tower-2")->key);
  const std::vector<float> patches = PatchValues(*pa, v.patch_size);
  ASSERT_EQ(patches.size(), static_cast<size_t>(pa->plan.vit_h) * pa->plan.vit_w * 3 * 14 * 14);
  for (float x : patches) ASSERT_TRUE(x >= -1.0f && x <= 1.0f);
  // Patch 0, channel 0, first pixel = the top-left pixel's red level.
  // Patch 0, channel 0, first value = the top-left pixel's red level, to bfloat16 precision.
  EXPECT_NEAR(patches[0], (pa->pixels.pixels[0] / 255.0f - 0.5f) / 0.5f, 1.0 / 128);
  // Level 0 -> -1 and 255 -> 1 exactly.
  PreparedImage black = *pa;
  std::fill(black.pixels.pixels.begin(), black.pixels.pixels.end(), 0);
  EXPECT_EQ(PatchValues(black, 14)[7], -1.0f);
}

}  // namespace
}  // namespace flashserve::vision
