// OpenCV's core, linked into the extension from Debian's static archive
// (python/static_link.py), carries its OpenGL interop, which looks GL
// functions up through GLX. Stoker never uses that interop; without this
// definition the extension would need libGLX, and through it libX11, which
// the containers training jobs run in lack. No function is found, which
// OpenCV would report as an error if anything ever asked.
extern "C" void (*glXGetProcAddressARB(const unsigned char* /*name*/))() { return nullptr; }
