package controlplane

// Records of node runs. A node run writes one before it creates anything on the
// machine, so that a later run can clean up after it if it is killed: that later run
// is root, and it kills the processes in the cgroups, unmounts the paths and deletes
// the network namespace a record names. A record therefore must come from the harness
// and name only what the harness makes:
//
//   - Records live in nodeRecordsDir, under /run, where only root creates entries
//     (the node needs root anyway). It must be a real directory (not a symlink) owned
//     by the running uid and writable by nobody else, or no record in it is read; each
//     record must be a regular file with the same owner and no group or world write
//     permission. We chose /run over keeping the records in /tmp with ownership
//     checks: in /tmp any user can create the names we look for, and safety would rest
//     on every check and every race being right; in /run a crafted record cannot be
//     placed at all, and the checks are a second line. /run is emptied at boot, as are
//     the namespaces, cgroups and mounts a record describes, so no record outlives
//     what it names (the user's cache directory would keep them across reboots).
//   - validateNodeRecord checks every field against what startNode makes: the network
//     namespace is mini-kcm-node-<pid>-<n> with a pid above 1, the file is named after
//     it, the cgroup is /<netns>, and the directory is <temp dir>/<tempDirPrefix>*/node,
//     absolute and clean, never "/" and without "..".
//   - The control plane directory a record names, if it still exists, must be a real
//     directory owned by the running uid and writable by nobody else: a directory of
//     the same name made by another user after ours was removed is not ours to clean.
//
// A record that fails a check is reported on stderr, naming the file and the problem,
// and left in place: it never leads to a kill, an unmount or a deletion.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// nodeRecordsDir holds the records of node runs, one <netns>.json per run.
const nodeRecordsDir = "/run/mini-kcm-e2e"

// maxNodeRecordSize bounds what is read of a record; ours are about 120 bytes.
const maxNodeRecordSize = 4096

// nodeRecord is what cleanup needs to know about a node run.
type nodeRecord struct {
	Netns string `json:"netns"`
	Dir   string `json:"dir"`
}

func (r nodeRecord) cgroupRoot() string { return "/" + r.Netns }
func (r nodeRecord) containerdSocket() string {
	return filepath.Join(r.Dir, "containerd", "containerd.sock")
}
func (r nodeRecord) fileName() string { return r.Netns + ".json" }

// storedNodeRecord is a record that passed every check, and the file it came from.
type storedNodeRecord struct {
	nodeRecord
	path string
}

// writeNodeRecord writes record into dir, creating dir if needed, and returns the
// record's path. It refuses a record that cleanup would refuse, and a dir that is not
// private to us.
func writeNodeRecord(dir string, record nodeRecord, tempDir string) (string, error) {
	if err := validateNodeRecord(record.fileName(), record, tempDir); err != nil {
		return "", fmt.Errorf("the node's record would be refused by cleanup (is TMPDIR an absolute path?): %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("creating %s: %w", dir, err)
	}
	info, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	if err := checkPrivate(info, os.Geteuid(), true); err != nil {
		return "", fmt.Errorf("refusing to keep node records in %s: %w; remove it and let the harness recreate it", dir, err)
	}
	data, err := json.Marshal(record)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, record.fileName())
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if errors.Is(err, fs.ErrExist) {
		// Our pid and run number are unique among live processes: a dead run with our
		// pid left it, and cleanup refused it or failed (its warning says why).
		return "", fmt.Errorf("%s already exists, left by a dead run with our pid: check what it names and remove it by hand", path)
	}
	if err != nil {
		return "", err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return path, f.Close()
}

// cleanupAbandonedRecords runs clean for each record in dir of a dead run (alive says
// which pids run) that passes every check, and removes the record once clean succeeds.
// Every record it refuses, and every clean that fails, it reports on warn; such
// records stay.
func cleanupAbandonedRecords(dir, tempDir string, alive func(pid int) bool, clean func(nodeRecord) error, warn io.Writer) {
	records, refused := abandonedNodeRecords(dir, tempDir, alive)
	for _, err := range refused {
		fmt.Fprintf(warn, "WARNING: mini-kcm test harness: not cleaning up after an abandoned node: %v; nothing it names was touched: check it and remove it by hand\n", err)
	}
	for _, r := range records {
		if err := clean(r.nodeRecord); err != nil {
			fmt.Fprintf(warn, "WARNING: mini-kcm test harness: cleaning up after abandoned node %s: %v; %s stays for the next run\n", r.Netns, err, r.path)
			continue
		}
		if err := os.Remove(r.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(warn, "WARNING: mini-kcm test harness: removing %s: %v\n", r.path, err)
		}
	}
}

// abandonedNodeRecords returns the records in dir of runs that are no longer alive
// and pass every check, and an error naming the file and the problem for each record
// it refuses. Records of live runs are neither. It only reads.
func abandonedNodeRecords(dir, tempDir string, alive func(pid int) bool) (records []storedNodeRecord, refused []error) {
	d, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // no node has run since boot
	}
	if err != nil {
		return nil, []error{fmt.Errorf("opening %s: %w", dir, err)}
	}
	defer d.Close()
	info, err := d.Stat()
	if err != nil {
		return nil, []error{fmt.Errorf("%s: %w", dir, err)}
	}
	if err := checkPrivate(info, os.Geteuid(), true); err != nil {
		return nil, []error{fmt.Errorf("records directory %s: %w", dir, err)}
	}
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, []error{fmt.Errorf("reading %s: %w", dir, err)}
	}
	sort.Strings(names)
	for _, name := range names {
		path := filepath.Join(dir, name)
		record, err := readNodeRecord(d, name, tempDir)
		if err != nil {
			refused = append(refused, fmt.Errorf("record %s: %w", path, err))
			continue
		}
		if pid, _ := nodeOwner(record.Netns); alive(pid) {
			continue
		}
		if err := checkControlPlaneDir(filepath.Dir(record.Dir)); err != nil {
			refused = append(refused, fmt.Errorf("record %s: %w", path, err))
			continue
		}
		records = append(records, storedNodeRecord{nodeRecord: record, path: path})
	}
	return records, refused
}

// readNodeRecord reads and checks the record name in the directory d, without
// following a symlink.
func readNodeRecord(d *os.File, name, tempDir string) (nodeRecord, error) {
	fd, err := unix.Openat(int(d.Fd()), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) {
		return nodeRecord{}, errors.New("is a symlink")
	}
	if err != nil {
		return nodeRecord{}, fmt.Errorf("opening: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nodeRecord{}, err
	}
	if err := checkPrivate(info, os.Geteuid(), false); err != nil {
		return nodeRecord{}, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxNodeRecordSize+1))
	if err != nil {
		return nodeRecord{}, err
	}
	if len(data) > maxNodeRecordSize {
		return nodeRecord{}, fmt.Errorf("larger than %d bytes", maxNodeRecordSize)
	}
	var record nodeRecord
	decoder := json.NewDecoder(bytes.NewReader(data))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&record); err != nil {
		return nodeRecord{}, fmt.Errorf("not a node record: %w", err)
	}
	if _, err := decoder.Token(); err != io.EOF {
		return nodeRecord{}, errors.New("not a node record: data after the record")
	}
	if err := validateNodeRecord(name, record, tempDir); err != nil {
		return nodeRecord{}, err
	}
	return record, nil
}

// checkPrivate returns nil when info describes a directory (wantDir) or a regular
// file, not a symlink, owned by uid and writable by no one else.
func checkPrivate(info fs.FileInfo, uid int, wantDir bool) error {
	switch mode := info.Mode(); {
	case mode&fs.ModeSymlink != 0:
		return errors.New("is a symlink")
	case wantDir && !mode.IsDir():
		return fmt.Errorf("is not a directory (mode %v)", mode)
	case !wantDir && !mode.IsRegular():
		return fmt.Errorf("is not a regular file (mode %v)", mode)
	case mode.Perm()&0o022 != 0:
		return fmt.Errorf("is group or world writable (mode %v)", mode)
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return errors.New("has no owner information")
	}
	if int64(st.Uid) != int64(uid) {
		return fmt.Errorf("is owned by uid %d, not by us (uid %d)", st.Uid, uid)
	}
	return nil
}

// checkControlPlaneDir returns nil when dir is gone (nothing can be mounted under it
// then) or is a directory private to us.
func checkControlPlaneDir(dir string) error {
	info, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := checkPrivate(info, os.Geteuid(), true); err != nil {
		return fmt.Errorf("control plane directory %s %w", dir, err)
	}
	return nil
}

// validateNodeRecord returns nil when every field of record, read from the file
// fileName, is what startNode would have written with the temp directory tempDir, and
// otherwise an error naming the field, its value and the problem.
func validateNodeRecord(fileName string, record nodeRecord, tempDir string) error {
	if _, err := parseNodeNetns(record.Netns); err != nil {
		return fmt.Errorf("netns %q: %w", record.Netns, err)
	}
	if fileName != record.fileName() {
		return fmt.Errorf("file name %q does not match netns %q (want %q)", fileName, record.Netns, record.fileName())
	}
	if err := validateNodeDir(record.Dir, tempDir); err != nil {
		return fmt.Errorf("dir %q: %w", record.Dir, err)
	}
	if err := validateCgroupRoot(record.cgroupRoot()); err != nil {
		return fmt.Errorf("cgroup %q: %w", record.cgroupRoot(), err)
	}
	return nil
}

// parseNodeNetns returns the pid in a network namespace name made by startNode,
// mini-kcm-node-<pid>-<n>, with both numbers written as %d writes them.
func parseNodeNetns(name string) (int, error) {
	if name == "" {
		return 0, errors.New("empty")
	}
	rest, ok := strings.CutPrefix(name, nodeNetnsPrefix)
	if !ok {
		return 0, fmt.Errorf("does not start with %q", nodeNetnsPrefix)
	}
	pidText, runText, ok := strings.Cut(rest, "-")
	pid, pidErr := strconv.Atoi(pidText)
	run, runErr := strconv.Atoi(runText)
	if !ok || pidErr != nil || runErr != nil || strconv.Itoa(pid) != pidText || strconv.Itoa(run) != runText {
		return 0, fmt.Errorf("is not %s<pid>-<n>", nodeNetnsPrefix)
	}
	if pid <= 1 {
		return 0, fmt.Errorf("pid %d is not a test process's (want > 1)", pid)
	}
	if run < 1 {
		return 0, fmt.Errorf("run %d out of range (want >= 1)", run)
	}
	return pid, nil
}

// validateNodeDir returns nil when dir is <tempDir>/<tempDirPrefix><suffix>/node.
func validateNodeDir(dir, tempDir string) error {
	want := filepath.Join(tempDir, tempDirPrefix+"*", "node")
	switch {
	case dir == "":
		return errors.New("empty")
	case dir == "/":
		return errors.New("is the root directory")
	case strings.Contains(dir, ".."):
		return errors.New(`contains ".."`)
	case strings.ContainsAny(dir, "\x00\n"):
		return errors.New("contains a NUL or a newline")
	case !filepath.IsAbs(dir):
		return errors.New("is not absolute")
	case filepath.Clean(dir) != dir:
		return fmt.Errorf("is not clean (%q)", filepath.Clean(dir))
	case !filepath.IsAbs(tempDir):
		return fmt.Errorf("the temp directory %q is not absolute", tempDir)
	}
	cpDir := filepath.Dir(dir)
	cpName := filepath.Base(cpDir)
	if filepath.Base(dir) != "node" || filepath.Dir(cpDir) != filepath.Clean(tempDir) ||
		!strings.HasPrefix(cpName, tempDirPrefix) || cpName == tempDirPrefix {
		return fmt.Errorf("is not a directory the harness made (%s)", want)
	}
	return nil
}

// validateCgroupRoot returns nil when root is one cgroup below a hierarchy's root,
// named by a node run: the walk that kills processes stays inside it.
func validateCgroupRoot(root string) error {
	if filepath.Clean(root) != root || filepath.Dir(root) != "/" || !strings.HasPrefix(filepath.Base(root), nodeNetnsPrefix) {
		return fmt.Errorf("is not /%s<pid>-<n>", nodeNetnsPrefix)
	}
	return nil
}
