// A box in image coordinates: top row, left column, height, width. The value
// that decoders (a crop decoded straight from the bytes), the ops and the
// targets' geometry pass between them. A value type; thread-compatible.
#ifndef STOKER_DATAPLANE_BASE_CROP_BOX_H_
#define STOKER_DATAPLANE_BASE_CROP_BOX_H_

namespace stoker {

struct CropBox {
  int top = 0, left = 0, height = 0, width = 0;
  bool operator==(const CropBox& o) const {
    return top == o.top && left == o.left && height == o.height && width == o.width;
  }
};

}  // namespace stoker

#endif  // STOKER_DATAPLANE_BASE_CROP_BOX_H_
