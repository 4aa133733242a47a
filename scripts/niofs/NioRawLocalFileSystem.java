package changefeed.niofs;

import java.io.DataOutput;
import java.io.File;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Map;
import java.util.Set;

import org.apache.hadoop.fs.FSLinkResolver;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * RawLocalFileSystem that uses java.nio instead of forking chmod / readlink / ls when libhadoop is absent.
 * setPermission: Files.setPosixFilePermissions (falls back to super for setuid/setgid/sticky bits).
 * getFileLinkStatus / getLinkTarget: Files.isSymbolicLink / readSymbolicLink instead of `readlink`.
 * getFileStatus: one readAttributes call; permission/owner/group loaded lazily via the "unix" view
 * instead of `ls -ld`.
 */
public class NioRawLocalFileSystem extends RawLocalFileSystem {

  private static final PosixFilePermission[] BITS = {
      PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_READ,
      PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
      PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_READ};

  static Set<PosixFilePermission> toPosix(int mode) {
    Set<PosixFilePermission> s = EnumSet.noneOf(PosixFilePermission.class);
    for (int i = 0; i < 9; i++) if ((mode & (1 << i)) != 0) s.add(BITS[i]);
    return s;
  }

  static int fromPosix(Set<PosixFilePermission> s) {
    int m = 0;
    for (int i = 0; i < 9; i++) if (s.contains(BITS[i])) m |= 1 << i;
    return m;
  }

  @Override
  public void setPermission(Path p, FsPermission permission) throws IOException {
    int mode = permission.toShort() & 07777;
    if ((mode & 07000) != 0) { // special bits: NIO cannot set them
      super.setPermission(p, permission);
      return;
    }
    try {
      Files.setPosixFilePermissions(pathToFile(p).toPath(), toPosix(mode));
    } catch (NoSuchFileException e) {
      throw new FileNotFoundException("File " + p + " does not exist");
    }
  }

  @Override
  public FileStatus getFileStatus(Path f) throws IOException {
    File file = pathToFile(f);
    BasicFileAttributes a;
    try {
      a = Files.readAttributes(file.toPath(), BasicFileAttributes.class); // follows links, like File.exists()
    } catch (NoSuchFileException e) {
      throw new FileNotFoundException("File " + f + " does not exist");
    }
    return new NioFileStatus(a.size(), a.isDirectory(), getDefaultBlockSize(f),
        a.lastModifiedTime().toMillis(), a.lastAccessTime().toMillis(),
        new Path(file.getPath()).makeQualified(getUri(), getWorkingDirectory()), file);
  }

  /** Same result as RawLocalFileSystem's deprecated (non-Stat) path, without forking readlink. */
  private FileStatus linkStatus(Path f) throws IOException {
    // exactly the file the original passes to `readlink`: new File(f.toString()) (for a qualified
    // "file:/..." path that is a relative name that does not exist, so the target is "" as before)
    java.nio.file.Path p = new File(f.toString()).toPath();
    String target = Files.isSymbolicLink(p) ? Files.readSymbolicLink(p).toString() : "";
    try {
      FileStatus fs = getFileStatus(f);
      if (target.isEmpty()) return fs;
      return new FileStatus(fs.getLen(), false, fs.getReplication(), fs.getBlockSize(),
          fs.getModificationTime(), fs.getAccessTime(), fs.getPermission(), fs.getOwner(), fs.getGroup(),
          new Path(target), f);
    } catch (FileNotFoundException e) {
      if (!target.isEmpty()) {
        return new FileStatus(0, false, 0, 0, 0, 0, FsPermission.getDefault(), "", "", new Path(target), f);
      }
      throw e;
    }
  }

  @Override
  public FileStatus getFileLinkStatus(Path f) throws IOException {
    FileStatus fi = linkStatus(f);
    if (fi.isSymlink()) {
      fi.setSymlink(FSLinkResolver.qualifySymlinkTarget(getUri(), fi.getPath(), fi.getSymlink()));
    }
    return fi;
  }

  @Override
  public Path getLinkTarget(Path f) throws IOException {
    return linkStatus(f).getSymlink();
  }

  /** FileStatus whose permission/owner/group are read lazily with NIO (lstat, like `ls -ld`). */
  static final class NioFileStatus extends FileStatus {
    private static final long serialVersionUID = 1L;
    private final transient File file;

    NioFileStatus(long len, boolean dir, long blockSize, long mtime, long atime, Path path, File file) {
      super(len, dir, 1, blockSize, mtime, atime, null, null, null, path);
      this.file = file;
    }

    private boolean loaded() { return !super.getOwner().isEmpty(); }

    private synchronized void load() {
      if (loaded()) return;
      // after Java deserialization `file` is null: use the path, as the original's `ls -ld` does
      java.nio.file.Path p = (file != null ? file : new File(getPath().toUri())).toPath();
      try {
        int mode;
        String owner, group;
        try {
          Map<String, Object> m = Files.readAttributes(p, "unix:mode,owner,group", LinkOption.NOFOLLOW_LINKS);
          mode = ((Integer) m.get("mode")) & 07777;
          owner = m.get("owner").toString();
          group = m.get("group").toString();
        } catch (UnsupportedOperationException | IllegalArgumentException e) {
          PosixFileAttributes pa = Files.readAttributes(p, PosixFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
          mode = fromPosix(pa.permissions());
          owner = pa.owner().getName();
          group = pa.group().getName();
        }
        setPermission(new FsPermission((short) mode));
        setOwner(owner);
        setGroup(group);
      } catch (NoSuchFileException e) {
        // `ls -ld` exit code 1 in the original: leave defaults
        setPermission(null); setOwner(null); setGroup(null);
      } catch (IOException e) {
        throw new RuntimeException("Error while reading file permissions of " + file, e);
      }
    }

    @Override public FsPermission getPermission() { load(); return super.getPermission(); }
    @Override public String getOwner() { load(); return super.getOwner(); }
    @Override public String getGroup() { load(); return super.getGroup(); }
    @Override public void write(DataOutput out) throws IOException { load(); super.write(out); }
  }
}
