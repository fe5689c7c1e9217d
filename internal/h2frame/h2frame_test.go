package h2frame

import (
	"bytes"
	"testing"

	"golang.org/x/net/http2"
)

// TestFramesReadByXNet: what the appenders write, x/net's framer reads as
// the frames meant, and a header read back is the one written.
func TestFramesReadByXNet(t *testing.T) {
	var b []byte
	b = AppendHeader(b, 12, http2.FrameSettings, 0, 0)
	b = AppendSetting(b, http2.SettingInitialWindowSize, 1<<20)
	b = AppendSetting(b, http2.SettingMaxConcurrentStreams, 7)
	b = AppendWindowUpdate(b, 3, 999)
	b = AppendRSTStream(b, 5, http2.ErrCodeCancel)
	b = AppendGoAway(b, 9, http2.ErrCodeProtocol)
	fr := http2.NewFramer(nil, bytes.NewReader(b))
	f, err := fr.ReadFrame()
	if s, ok := f.(*http2.SettingsFrame); err != nil || !ok || s.NumSettings() != 2 || s.Setting(0).Val != 1<<20 || s.Setting(1).Val != 7 {
		t.Fatalf("settings: %v %v", f, err)
	}
	if f, err = fr.ReadFrame(); err != nil || f.(*http2.WindowUpdateFrame).Increment != 999 || f.Header().StreamID != 3 {
		t.Fatalf("window update: %v %v", f, err)
	}
	if f, err = fr.ReadFrame(); err != nil || f.(*http2.RSTStreamFrame).ErrCode != http2.ErrCodeCancel || f.Header().StreamID != 5 {
		t.Fatalf("rst: %v %v", f, err)
	}
	if f, err = fr.ReadFrame(); err != nil || f.(*http2.GoAwayFrame).LastStreamID != 9 || f.(*http2.GoAwayFrame).ErrCode != http2.ErrCodeProtocol {
		t.Fatalf("goaway: %v %v", f, err)
	}
	n, typ, flags, stream := ReadHeader(AppendHeader(nil, 70000, http2.FrameHeaders, http2.FlagHeadersEndHeaders, 1<<31|77))
	if n != 70000 || typ != http2.FrameHeaders || flags != http2.FlagHeadersEndHeaders || stream != 77 {
		t.Fatalf("header read back: %d %v %v %d", n, typ, flags, stream)
	}
}

// TestUnpad: padding comes off; padding as long as the frame is refused.
func TestUnpad(t *testing.T) {
	if p, ok := Unpad(0, []byte("abc")); !ok || string(p) != "abc" {
		t.Fatal("unpadded")
	}
	if p, ok := Unpad(http2.FlagDataPadded, []byte("\x02abcXY")); !ok || string(p) != "abc" {
		t.Fatalf("padded: %q %v", p, ok)
	}
	for _, bad := range []string{"", "\x03ab", "\x01"} {
		if _, ok := Unpad(http2.FlagDataPadded, []byte(bad)); ok {
			t.Fatalf("%q accepted", bad)
		}
	}
}
