// Command tlogread reads one log of a notary as an independent C2SP tlog-tiles client, with Go's
// golang.org/x/mod/sumdb/note and golang.org/x/mod/sumdb/tlog: it opens the log's checkpoint
// under the log's key, reads the hash tiles (tlog's TileHashReader checks each against the
// checkpoint's root), and for each index given reads the entry from its bundle and proves it in
// the tree from those tiles alone. It prints "SIZE ROOT", then "INDEX ENTRY-HEX" per index.
// Written for tests/notary/http/test_logs_go_tlog.py.
//
// Usage: tlogread LOG-URL VKEY ORIGIN INDEX...   (exit 1: something did not verify)
package main

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

const height = 8 // C2SP tlog-tiles: tiles of 256 hashes

func fail(format string, args ...any) {
	fmt.Printf(format+"\n", args...)
	os.Exit(1)
}

func get(url string) []byte {
	r, err := http.Get(url)
	if err != nil {
		fail("GET %s: %v", url, err)
	}
	defer r.Body.Close()
	body, err := io.ReadAll(r.Body)
	if err != nil || r.StatusCode != 200 {
		fail("GET %s: %d %v", url, r.StatusCode, err)
	}
	return body
}

// c2spPath is a tile's path in tlog-tiles: Go's sumdb path without the height, and "entries"
// for the level sumdb calls "data".
func c2spPath(t tlog.Tile) string {
	p := strings.TrimPrefix(t.Path(), fmt.Sprintf("tile/%d/", height))
	return "tile/" + strings.Replace(p, "data/", "entries/", 1)
}

type tiles struct{ url string }

func (r tiles) Height() int { return height }

func (r tiles) ReadTiles(ts []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(ts))
	for i, t := range ts {
		out[i] = get(r.url + "/" + c2spPath(t))
	}
	return out, nil
}

func (r tiles) SaveTiles([]tlog.Tile, [][]byte) {}

// entry is entry i of a tlog-tiles entry bundle: big-endian uint16 length, then the bytes.
func entry(bundle []byte, i int64) []byte {
	for k := int64(0); len(bundle) >= 2; k++ {
		n := int(bundle[0])<<8 | int(bundle[1])
		if len(bundle) < 2+n {
			break
		}
		if k == i {
			return bundle[2 : 2+n]
		}
		bundle = bundle[2+n:]
	}
	fail("the bundle has no entry %d", i)
	return nil
}

func main() {
	url, vkey, origin := os.Args[1], os.Args[2], os.Args[3]
	verifier, err := note.NewVerifier(vkey)
	if err != nil {
		fail("verifier: %v", err)
	}
	n, err := note.Open(get(url+"/checkpoint"), note.VerifierList(verifier))
	if err != nil {
		fail("checkpoint: %v", err)
	}
	lines := strings.SplitN(n.Text, "\n", 4)
	if len(lines) < 4 || lines[0] != origin {
		fail("checkpoint of another origin: %q", n.Text)
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	root, err2 := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || err2 != nil || len(root) != tlog.HashSize {
		fail("checkpoint body: %q", n.Text)
	}
	tree := tlog.Tree{N: size}
	copy(tree.Hash[:], root)
	hashes := tlog.TileHashReader(tree, tiles{url})
	if th, err := tlog.TreeHash(size, hashes); err != nil || th != tree.Hash {
		fail("tree hash from the tiles: %v", err)
	}
	fmt.Println(size, lines[2])
	for _, arg := range os.Args[4:] {
		i, err := strconv.ParseInt(arg, 10, 64)
		if err != nil || i < 0 || i >= size {
			fail("index %q is not in the tree of size %d", arg, size)
		}
		w := size - i/256*256
		if w > 256 {
			w = 256
		}
		t := tlog.Tile{H: height, L: -1, N: i / 256, W: int(w)}
		data := entry(get(url+"/"+c2spPath(t)), i%256)
		proof, err := tlog.ProveRecord(size, i, hashes)
		if err != nil {
			fail("proof of %d: %v", i, err)
		}
		if err := tlog.CheckRecord(proof, size, tree.Hash, i, tlog.RecordHash(data)); err != nil {
			fail("entry %d is not in the tree: %v", i, err)
		}
		fmt.Println(i, hex.EncodeToString(data))
	}
}
