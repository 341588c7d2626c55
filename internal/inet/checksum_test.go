package inet

import "testing"

func TestChecksum(t *testing.T) {
	// RFC 1071 §3's example words 0001 f203 f4f5 f6f7: sum ddf2, checksum 220d.
	if c := Checksum([]byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}); c != 0x220d {
		t.Errorf("checksum = %#x, want 0x220d", c)
	}
	h := []byte{0x45, 0, 0, 0x54, 0, 0, 0x40, 0, 0x40, 1, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2}
	c := Checksum(h)
	h[10], h[11] = byte(c>>8), byte(c)
	if Checksum(h) != 0 {
		t.Error("a header with its checksum filled in does not sum to 0")
	}
	if Checksum([]byte{0xff}) != 0x00ff {
		t.Errorf("odd length: %#x", Checksum([]byte{0xff}))
	}
}
