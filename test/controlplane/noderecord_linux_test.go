package controlplane

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests read and write only in t.TempDir(): they need no root, start no control
// plane and touch no namespace, cgroup, mount or process.

// deadPid and livePid are pids the tests' alive function reports as gone and running.
const deadPid, livePid = 4242, 4343

func aliveForTest(pid int) bool { return pid == livePid }

// A root harness acts on what a record names, so every field must be what startNode
// writes: a crafted field must never reach a kill or an unmount.
func TestValidateNodeRecordRefusesEveryFieldStartNodeWouldNotWrite(t *testing.T) {
	tmp := "/tmp"
	good := nodeRecord{Netns: "mini-kcm-node-4242-1", Dir: "/tmp/mini-kcm-controlplane-123/node"}
	for _, tc := range []struct {
		name     string
		fileName string // "" means good.fileName()
		record   nodeRecord
		wantErr  string // "" means accepted
	}{
		{name: "well-formed", record: good},
		{name: "second run of a process", fileName: "mini-kcm-node-4242-12.json", record: nodeRecord{Netns: "mini-kcm-node-4242-12", Dir: good.Dir}},

		{name: "empty record", record: nodeRecord{}, wantErr: `netns "": empty`},
		{name: "empty netns", record: nodeRecord{Dir: good.Dir}, wantErr: `netns "": empty`},
		{name: "netns without the prefix", fileName: "kubepods.json", record: nodeRecord{Netns: "kubepods", Dir: good.Dir}, wantErr: "does not start with"},
		{name: "netns climbing out of the cgroup hierarchy", fileName: "x.json", record: nodeRecord{Netns: "mini-kcm-node-/../..", Dir: good.Dir}, wantErr: "is not mini-kcm-node-<pid>-<n>"},
		{name: "netns with a path after it", fileName: "x.json", record: nodeRecord{Netns: "mini-kcm-node-4242-1/../..", Dir: good.Dir}, wantErr: "is not mini-kcm-node-<pid>-<n>"},
		{name: "netns of the root cgroup", fileName: "x.json", record: nodeRecord{Netns: "/", Dir: good.Dir}, wantErr: "does not start with"},
		{name: "netns without a run number", fileName: "mini-kcm-node-4242.json", record: nodeRecord{Netns: "mini-kcm-node-4242", Dir: good.Dir}, wantErr: "is not mini-kcm-node-<pid>-<n>"},
		{name: "netns with a signed pid", fileName: "mini-kcm-node-+4242-1.json", record: nodeRecord{Netns: "mini-kcm-node-+4242-1", Dir: good.Dir}, wantErr: "is not mini-kcm-node-<pid>-<n>"},
		{name: "netns of init", fileName: "mini-kcm-node-1-1.json", record: nodeRecord{Netns: "mini-kcm-node-1-1", Dir: good.Dir}, wantErr: "is not a test process's"},
		{name: "netns of pid 0", fileName: "mini-kcm-node-0-1.json", record: nodeRecord{Netns: "mini-kcm-node-0-1", Dir: good.Dir}, wantErr: "is not a test process's"},
		{name: "netns of run 0", fileName: "mini-kcm-node-4242-0.json", record: nodeRecord{Netns: "mini-kcm-node-4242-0", Dir: good.Dir}, wantErr: "out of range"},
		{name: "file named after another netns", fileName: "mini-kcm-node-4343-1.json", record: good, wantErr: "does not match netns"},

		{name: "empty dir", record: nodeRecord{Netns: good.Netns}, wantErr: `dir "": empty`},
		{name: "root dir", record: nodeRecord{Netns: good.Netns, Dir: "/"}, wantErr: "is the root directory"},
		{name: "dir with ..", record: nodeRecord{Netns: good.Netns, Dir: "/tmp/mini-kcm-controlplane-123/../../etc/node"}, wantErr: `contains ".."`},
		{name: "dir with .. inside a name", record: nodeRecord{Netns: good.Netns, Dir: "/tmp/mini-kcm-controlplane-1..2/node"}, wantErr: `contains ".."`},
		{name: "relative dir", record: nodeRecord{Netns: good.Netns, Dir: "tmp/mini-kcm-controlplane-123/node"}, wantErr: "is not absolute"},
		{name: "unclean dir", record: nodeRecord{Netns: good.Netns, Dir: "/tmp//mini-kcm-controlplane-123/node"}, wantErr: "is not clean"},
		{name: "dir with a trailing slash", record: nodeRecord{Netns: good.Netns, Dir: "/tmp/mini-kcm-controlplane-123/node/"}, wantErr: "is not clean"},
		{name: "dir with a NUL", record: nodeRecord{Netns: good.Netns, Dir: "/tmp/mini-kcm-controlplane-1\x00/node"}, wantErr: "NUL"},
		{name: "dir outside the temp dir", record: nodeRecord{Netns: good.Netns, Dir: "/var/lib/mini-kcm-controlplane-123/node"}, wantErr: "is not a directory the harness made"},
		{name: "system dir", record: nodeRecord{Netns: good.Netns, Dir: "/var/lib"}, wantErr: "is not a directory the harness made"},
		{name: "the temp dir itself", record: nodeRecord{Netns: good.Netns, Dir: "/tmp"}, wantErr: "is not a directory the harness made"},
		{name: "control plane dir rather than its node dir", record: nodeRecord{Netns: good.Netns, Dir: "/tmp/mini-kcm-controlplane-123"}, wantErr: "is not a directory the harness made"},
		{name: "another dir of the control plane", record: nodeRecord{Netns: good.Netns, Dir: "/tmp/mini-kcm-controlplane-123/pki"}, wantErr: "is not a directory the harness made"},
		{name: "dir below the node dir", record: nodeRecord{Netns: good.Netns, Dir: "/tmp/mini-kcm-controlplane-123/node/kubelet"}, wantErr: "is not a directory the harness made"},
		{name: "dir of another program", record: nodeRecord{Netns: good.Netns, Dir: "/tmp/systemd-private-1/node"}, wantErr: "is not a directory the harness made"},
		{name: "dir with the bare prefix", record: nodeRecord{Netns: good.Netns, Dir: "/tmp/mini-kcm-controlplane-/node"}, wantErr: "is not a directory the harness made"},
		{name: "dir nested deeper in the temp dir", record: nodeRecord{Netns: good.Netns, Dir: "/tmp/a/mini-kcm-controlplane-123/node"}, wantErr: "is not a directory the harness made"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fileName := tc.fileName
			if fileName == "" {
				fileName = good.fileName()
			}
			err := validateNodeRecord(fileName, tc.record, tmp)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("validateNodeRecord(%q, %+v) = %v, want it accepted", fileName, tc.record, err)
			case tc.wantErr != "" && err == nil:
				t.Errorf("validateNodeRecord(%q, %+v) accepted it, want an error containing %q", fileName, tc.record, tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Errorf("validateNodeRecord(%q, %+v) = %v, want an error containing %q", fileName, tc.record, err, tc.wantErr)
			}
		})
	}
}

// A record, its directory and the control plane directory it names must be owned by
// us and writable by nobody else; this checks the rule on file information alone, so
// that other owners are covered without root.
func TestCheckPrivateRefusesOtherOwnersSymlinksAndGroupOrWorldWritable(t *testing.T) {
	const us, other = 1000, 1001
	for _, tc := range []struct {
		name    string
		info    fakeFileInfo
		wantDir bool
		wantErr string
	}{
		{name: "our private directory", info: fakeFileInfo{mode: fs.ModeDir | 0o700, uid: us}, wantDir: true},
		{name: "our read-only-for-others directory", info: fakeFileInfo{mode: fs.ModeDir | 0o755, uid: us}, wantDir: true},
		{name: "our private file", info: fakeFileInfo{mode: 0o600, uid: us}},
		{name: "our file others may read", info: fakeFileInfo{mode: 0o644, uid: us}},

		{name: "file of another uid", info: fakeFileInfo{mode: 0o600, uid: other}, wantErr: "owned by uid 1001"},
		{name: "directory of another uid", info: fakeFileInfo{mode: fs.ModeDir | 0o700, uid: other}, wantDir: true, wantErr: "owned by uid 1001"},
		{name: "group-writable file", info: fakeFileInfo{mode: 0o620, uid: us}, wantErr: "group or world writable"},
		{name: "world-writable file", info: fakeFileInfo{mode: 0o602, uid: us}, wantErr: "group or world writable"},
		{name: "group-writable directory", info: fakeFileInfo{mode: fs.ModeDir | 0o770, uid: us}, wantDir: true, wantErr: "group or world writable"},
		{name: "world-writable sticky directory like /tmp", info: fakeFileInfo{mode: fs.ModeDir | fs.ModeSticky | 0o777, uid: us}, wantDir: true, wantErr: "group or world writable"},
		{name: "symlink", info: fakeFileInfo{mode: fs.ModeSymlink | 0o777, uid: us}, wantErr: "symlink"},
		{name: "symlink for a directory", info: fakeFileInfo{mode: fs.ModeSymlink | 0o777, uid: us}, wantDir: true, wantErr: "symlink"},
		{name: "directory for a file", info: fakeFileInfo{mode: fs.ModeDir | 0o700, uid: us}, wantErr: "not a regular file"},
		{name: "file for a directory", info: fakeFileInfo{mode: 0o600, uid: us}, wantDir: true, wantErr: "not a directory"},
		{name: "fifo for a file", info: fakeFileInfo{mode: fs.ModeNamedPipe | 0o600, uid: us}, wantErr: "not a regular file"},
		{name: "no owner information", info: fakeFileInfo{mode: 0o600, uid: us, noStat: true}, wantErr: "no owner information"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkPrivate(tc.info, us, tc.wantDir)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("checkPrivate = %v, want it accepted", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("checkPrivate = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

// The end-to-end rule: of the crafted records beside a well-formed one, cleanup runs
// for the well-formed one only, reports each crafted one on stderr naming its file, and
// leaves every crafted one where it was.
func TestCleanupAbandonedRecordsCleansOnlyWellFormedRecordsOfDeadRuns(t *testing.T) {
	tmp := privateTempDir(t)
	records := filepath.Join(privateTempDir(t), "records")
	mkdirPrivate(t, records)

	goodDir := filepath.Join(tmp, tempDirPrefix+"good", "node")
	mkdirPrivate(t, filepath.Dir(goodDir))
	goneDir := filepath.Join(tmp, tempDirPrefix+"gone", "node") // its control plane directory was removed
	othersDir := filepath.Join(tmp, tempDirPrefix+"others", "node")
	mkdirPrivate(t, filepath.Dir(othersDir))
	chmod(t, filepath.Dir(othersDir), 0o777)
	linkedDir := filepath.Join(tmp, tempDirPrefix+"linked", "node")
	if err := os.Symlink("/", filepath.Dir(linkedDir)); err != nil {
		t.Fatal(err)
	}

	accepted := map[string]nodeRecord{
		"mini-kcm-node-4242-1.json": {Netns: "mini-kcm-node-4242-1", Dir: goodDir},
		"mini-kcm-node-4242-2.json": {Netns: "mini-kcm-node-4242-2", Dir: goneDir},
	}
	crafted := map[string]string{ // file name: content
		"mini-kcm-node-4242-3.json":  `{"netns":"mini-kcm-node-4242-3","dir":"/"}`,
		"mini-kcm-node-4242-4.json":  `{"netns":"mini-kcm-node-4242-4","dir":"` + filepath.Dir(goodDir) + `/../../etc/node"}`,
		"mini-kcm-node-4242-5.json":  `{"netns":"mini-kcm-node-4242-5","dir":""}`,
		"mini-kcm-node-4242-6.json":  `{}`,
		"mini-kcm-node-4242-7.json":  `{"netns":"mini-kcm-node-4242-7","dir":"/var/lib/kubelet"}`,
		"mini-kcm-node-4242-8.json":  `{"netns":"mini-kcm-node-4242-8","dir":"` + othersDir + `"}`,
		"mini-kcm-node-4242-9.json":  `{"netns":"mini-kcm-node-4242-9","dir":"` + linkedDir + `"}`,
		"mini-kcm-node-4242-10.json": `{"netns":"mini-kcm-node-4242-10","dir":"` + goodDir + `","pid":1}`,
		"mini-kcm-node-4242-11.json": `{"netns":"mini-kcm-node-4242-11","dir":"` + goodDir + `"}{}`,
		"mini-kcm-node-4242-12.json": `not json`,
		"mini-kcm-node-1-1.json":     `{"netns":"mini-kcm-node-1-1","dir":"` + goodDir + `"}`,
		"x.json":                     `{"netns":"mini-kcm-node-/../..","dir":"` + goodDir + `"}`,
		"mini-kcm-node-4343-9.json":  `{"netns":"mini-kcm-node-4242-13","dir":"` + goodDir + `"}`,
	}
	for name, r := range accepted {
		data, _ := json.Marshal(r)
		writePrivate(t, filepath.Join(records, name), data)
	}
	for name, content := range crafted {
		writePrivate(t, filepath.Join(records, name), []byte(content))
	}
	// A well-formed record made writable by others, or a symlink to one, is crafted too.
	writePrivate(t, filepath.Join(records, "mini-kcm-node-4242-20.json"), []byte(`{"netns":"mini-kcm-node-4242-20","dir":"`+goodDir+`"}`))
	chmod(t, filepath.Join(records, "mini-kcm-node-4242-20.json"), 0o666)
	crafted["mini-kcm-node-4242-20.json"] = "group and world writable"
	if err := os.Symlink(filepath.Join(records, "mini-kcm-node-4242-1.json"), filepath.Join(records, "mini-kcm-node-4242-21.json")); err != nil {
		t.Fatal(err)
	}
	crafted["mini-kcm-node-4242-21.json"] = "symlink"
	// A live run's record is neither cleaned nor reported.
	live := nodeRecord{Netns: "mini-kcm-node-4343-1", Dir: goodDir}
	data, _ := json.Marshal(live)
	writePrivate(t, filepath.Join(records, live.fileName()), data)

	var cleaned []nodeRecord
	var warnings bytes.Buffer
	cleanupAbandonedRecords(records, tmp, aliveForTest, func(r nodeRecord) error {
		cleaned = append(cleaned, r)
		return nil
	}, &warnings)

	want := []nodeRecord{accepted["mini-kcm-node-4242-1.json"], accepted["mini-kcm-node-4242-2.json"]}
	if !slices.Equal(cleaned, want) {
		t.Errorf("cleaned %+v, want only %+v", cleaned, want)
	}
	for name := range accepted {
		if _, err := os.Lstat(filepath.Join(records, name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("record %s of a cleaned node is still there (%v)", name, err)
		}
	}
	for name := range crafted {
		if _, err := os.Lstat(filepath.Join(records, name)); err != nil {
			t.Errorf("crafted record %s is gone: %v", name, err)
		}
		if !strings.Contains(warnings.String(), filepath.Join(records, name)+":") {
			t.Errorf("crafted record %s not reported; warnings:\n%s", name, &warnings)
		}
	}
	if _, err := os.Lstat(filepath.Join(records, live.fileName())); err != nil {
		t.Errorf("a live run's record is gone: %v", err)
	}
	if strings.Contains(warnings.String(), live.fileName()) {
		t.Errorf("a live run's record was reported:\n%s", &warnings)
	}
	t.Logf("what the harness reported:\n%s", &warnings)
}

// A record the harness cannot vouch for its directory is not read at all.
func TestCleanupAbandonedRecordsReadsNothingFromADirectoryOthersCanWrite(t *testing.T) {
	tmp := privateTempDir(t)
	goodDir := filepath.Join(tmp, tempDirPrefix+"good", "node")
	mkdirPrivate(t, filepath.Dir(goodDir))
	record := nodeRecord{Netns: "mini-kcm-node-4242-1", Dir: goodDir}
	data, _ := json.Marshal(record)

	writable := filepath.Join(privateTempDir(t), "records")
	mkdirPrivate(t, writable)
	writePrivate(t, filepath.Join(writable, record.fileName()), data)
	chmod(t, writable, fs.ModeSticky|0o777)
	linked := filepath.Join(privateTempDir(t), "records")
	if err := os.Symlink(writable, linked); err != nil {
		t.Fatal(err)
	}

	for name, dir := range map[string]string{"world-writable": writable, "symlink": linked} {
		t.Run(name, func(t *testing.T) {
			var warnings bytes.Buffer
			cleanupAbandonedRecords(dir, tmp, aliveForTest, func(r nodeRecord) error {
				t.Errorf("cleaned %+v from a directory others can write", r)
				return nil
			}, &warnings)
			if !strings.Contains(warnings.String(), dir) {
				t.Errorf("warnings do not name %s:\n%s", dir, &warnings)
			}
			if _, err := os.Stat(filepath.Join(dir, record.fileName())); err != nil {
				t.Errorf("record gone: %v", err)
			}
		})
	}
}

// Before any node ran since boot there is no records directory: nothing to do, nothing
// to report.
func TestCleanupAbandonedRecordsIsQuietWithoutARecordsDirectory(t *testing.T) {
	var warnings bytes.Buffer
	cleanupAbandonedRecords(filepath.Join(t.TempDir(), "missing"), privateTempDir(t), aliveForTest, func(r nodeRecord) error {
		t.Errorf("cleaned %+v", r)
		return nil
	}, &warnings)
	if warnings.Len() > 0 {
		t.Errorf("warnings: %s", &warnings)
	}
}

// A cleanup that fails keeps its record, so that the next run tries again.
func TestCleanupAbandonedRecordsKeepsTheRecordWhenCleanupFails(t *testing.T) {
	tmp := privateTempDir(t)
	records := filepath.Join(privateTempDir(t), "records")
	mkdirPrivate(t, records)
	record := nodeRecord{Netns: "mini-kcm-node-4242-1", Dir: filepath.Join(tmp, tempDirPrefix+"x", "node")}
	data, _ := json.Marshal(record)
	writePrivate(t, filepath.Join(records, record.fileName()), data)

	var warnings bytes.Buffer
	cleanupAbandonedRecords(records, tmp, aliveForTest, func(nodeRecord) error { return errors.New("device busy") }, &warnings)
	if _, err := os.Stat(filepath.Join(records, record.fileName())); err != nil {
		t.Errorf("record gone after a failed cleanup: %v", err)
	}
	if !strings.Contains(warnings.String(), "device busy") {
		t.Errorf("failure not reported:\n%s", &warnings)
	}
}

// The record startNode writes is one cleanup accepts, in a directory it creates
// private; it refuses a directory others can write and a record cleanup would refuse.
func TestWriteNodeRecordWritesAPrivateRecordCleanupAccepts(t *testing.T) {
	tmp := privateTempDir(t)
	records := filepath.Join(privateTempDir(t), "records")
	record := nodeRecord{Netns: "mini-kcm-node-4242-1", Dir: filepath.Join(tmp, tempDirPrefix+"x", "node")}

	path, err := writeNodeRecord(records, record, tmp)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]fs.FileMode{records: fs.ModeDir | 0o700, path: 0o600} {
		if info, err := os.Lstat(p); err != nil || info.Mode() != want {
			t.Errorf("%s: mode %v (%v), want %v", p, info.Mode(), err, want)
		}
	}
	got, refused := abandonedNodeRecords(records, tmp, aliveForTest)
	if len(refused) > 0 || len(got) != 1 || got[0].nodeRecord != record || got[0].path != path {
		t.Errorf("abandonedNodeRecords = %+v, %v; want %+v at %s", got, refused, record, path)
	}
	if _, err := writeNodeRecord(records, record, tmp); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("writeNodeRecord over an existing record = %v, want it refused", err)
	}

	if _, err := writeNodeRecord(records, nodeRecord{Netns: "mini-kcm-node-4242-2", Dir: "/"}, tmp); err == nil || !strings.Contains(err.Error(), "would be refused") {
		t.Errorf("writeNodeRecord of a record cleanup refuses = %v", err)
	}

	chmod(t, records, 0o777)
	if _, err := writeNodeRecord(records, nodeRecord{Netns: "mini-kcm-node-4242-3", Dir: record.Dir}, tmp); err == nil || !strings.Contains(err.Error(), "group or world writable") {
		t.Errorf("writeNodeRecord into a world-writable directory = %v", err)
	}
}

// With real files rather than file information: a record owned by another uid is
// refused. Making such a file needs root; without it the rule is covered by
// TestCheckPrivateRefusesOtherOwnersSymlinksAndGroupOrWorldWritable.
func TestCleanupAbandonedRecordsRefusesARecordOwnedByAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: creating a file owned by another uid needs root (chown); checkPrivate's own test covers the rule without root")
	}
	tmp := privateTempDir(t)
	records := filepath.Join(privateTempDir(t), "records")
	mkdirPrivate(t, records)
	cpDir := filepath.Join(tmp, tempDirPrefix+"x")
	mkdirPrivate(t, cpDir)
	record := nodeRecord{Netns: "mini-kcm-node-4242-1", Dir: filepath.Join(cpDir, "node")}
	data, _ := json.Marshal(record)
	path := filepath.Join(records, record.fileName())
	writePrivate(t, path, data)
	const nobody = 65534
	if err := os.Lchown(path, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	// And a control plane directory of another user's, for the second record.
	otherCP := filepath.Join(tmp, tempDirPrefix+"y")
	mkdirPrivate(t, otherCP)
	if err := os.Lchown(otherCP, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	second := nodeRecord{Netns: "mini-kcm-node-4242-2", Dir: filepath.Join(otherCP, "node")}
	data, _ = json.Marshal(second)
	writePrivate(t, filepath.Join(records, second.fileName()), data)

	var warnings bytes.Buffer
	cleanupAbandonedRecords(records, tmp, aliveForTest, func(r nodeRecord) error {
		t.Errorf("cleaned %+v", r)
		return nil
	}, &warnings)
	for _, want := range []string{"is owned by uid 65534", record.fileName(), second.fileName()} {
		if !strings.Contains(warnings.String(), want) {
			t.Errorf("warnings do not say %q:\n%s", want, &warnings)
		}
	}
}

// privateTempDir returns a t.TempDir() made 0700: t.TempDir() may honour a umask that
// leaves it group writable.
func privateTempDir(t *testing.T) string {
	dir := t.TempDir()
	chmod(t, dir, 0o700)
	return dir
}

func mkdirPrivate(t *testing.T, dir string) {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	chmod(t, dir, 0o700) // whatever the umask
}

func writePrivate(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	chmod(t, path, 0o600)
}

func chmod(t *testing.T, path string, mode fs.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// fakeFileInfo is file information with the owner and mode a test chooses.
type fakeFileInfo struct {
	mode   fs.FileMode
	uid    uint32
	noStat bool
}

func (f fakeFileInfo) Name() string       { return "record" }
func (f fakeFileInfo) Size() int64        { return 0 }
func (f fakeFileInfo) Mode() fs.FileMode  { return f.mode }
func (f fakeFileInfo) ModTime() time.Time { return time.Time{} }
func (f fakeFileInfo) IsDir() bool        { return f.mode.IsDir() }
func (f fakeFileInfo) Sys() any {
	if f.noStat {
		return nil
	}
	return &syscall.Stat_t{Uid: f.uid}
}
