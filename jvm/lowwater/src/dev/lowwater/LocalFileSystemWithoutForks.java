package dev.lowwater;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.ChecksumFs;
import org.apache.hadoop.fs.DelegateToFileSystem;
import org.apache.hadoop.fs.FSLinkResolver;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FsConstants;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

import java.io.File;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

/**
 * Hadoop's local file system ({@code file:}) as Hadoop has it, without the processes it forks.
 *
 * <p>Without Hadoop's native library (not on Maven Central, not in Debian), {@link RawLocalFileSystem}
 * forks {@code chmod} for each file and directory it creates with a permission, and {@code FileContext}'s
 * {@code RawLocalFs} forks {@code readlink} for each path it renames: Spark's offset and commit logs go
 * through there. Measured in the test suite: about 350 processes per short streaming query, a tenth of
 * the test session's CPU (docs/testing.md). Here the same two operations are made with {@code java.nio}:
 * <ul>
 *   <li>a permission of the nine rwx bits is set with {@link Files#setPosixFilePermissions}, which
 *       follows a link as {@code chmod} does; any other permission (a sticky bit) goes to Hadoop's
 *       own way;
 *   <li>a link's target is read with {@link Files#readSymbolicLink} from the very {@code File} Hadoop
 *       gives {@code readlink}: {@code new File(path.toString())}, so a path written as a URI
 *       ({@code file:/tmp/x}) is, as there, no link.
 * </ul>
 * Everything else is Hadoop's. Spark takes it with
 * {@code spark.hadoop.fs.file.impl=dev.lowwater.LocalFileSystemWithoutForks} and
 * {@code spark.hadoop.fs.AbstractFileSystem.file.impl=dev.lowwater.LocalFileSystemWithoutForks$Fs}
 * (lowwater's test session does; see {@code tests/spark/conftest.py}).
 */
public final class LocalFileSystemWithoutForks extends LocalFileSystem {

  public LocalFileSystemWithoutForks() {
    super(new Raw());
  }

  /** {@link RawLocalFileSystem} with {@code setPermission} and {@code getFileLinkStatus} in {@code java.nio}. */
  public static final class Raw extends RawLocalFileSystem {
    @Override
    public FileStatus getFileLinkStatus(Path f) throws IOException {
      FileStatus fi = linkStatus(f, this::getFileStatus);
      if (fi.isSymlink()) {  // qualified, as RawLocalFileSystem's
        fi.setSymlink(FSLinkResolver.qualifySymlinkTarget(getUri(), fi.getPath(), fi.getSymlink()));
      }
      return fi;
    }

    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
      short mode = permission.toShort();
      if ((mode & ~0777) != 0) {
        super.setPermission(p, permission);
        return;
      }
      try {
        Files.setPosixFilePermissions(pathToFile(p).toPath(), posix(mode));
      } catch (UnsupportedOperationException e) {  // a file store without POSIX permissions
        super.setPermission(p, permission);
      }
    }
  }

  /** {@code FileContext}'s {@code file:} ({@code fs.AbstractFileSystem.file.impl}): Hadoop's {@code LocalFs}
   * over {@link Raw}, with {@code RawLocalFs}'s {@code getFileLinkStatus} reading the link in
   * {@code java.nio}. */
  public static final class Fs extends ChecksumFs {
    public Fs(URI uri, Configuration conf) throws IOException, URISyntaxException {
      super(new RawFs(uri, conf));
    }

    public Fs(Configuration conf) throws IOException, URISyntaxException {
      this(FsConstants.LOCAL_FS_URI, conf);
    }
  }

  /** Hadoop's {@code org.apache.hadoop.fs.local.RawLocalFs} (whose constructors are not public) over
   * {@link Raw}. */
  static final class RawFs extends DelegateToFileSystem {
    RawFs(URI uri, Configuration conf) throws IOException, URISyntaxException {
      super(uri, new Raw(), conf, FsConstants.LOCAL_FS_URI.getScheme(), false);
    }

    @Override
    public int getUriDefaultPort() {
      return -1;
    }

    @Override
    @SuppressWarnings("deprecation")
    public org.apache.hadoop.fs.FsServerDefaults getServerDefaults() throws IOException {
      return org.apache.hadoop.fs.local.LocalConfigKeys.getServerDefaults();
    }

    @Override
    public boolean supportsSymlinks() {
      return true;
    }

    @Override
    public void createSymlink(Path target, Path link, boolean createParent) throws IOException {
      String scheme = target.toUri().getScheme();
      if (scheme != null && !"file".equals(scheme)) {
        throw new IOException("Unable to create symlink to non-local file system: " + target);
      }
      if (createParent) {
        mkdir(link.getParent(), FsPermission.getDirDefault(), true);
      }
      int result = org.apache.hadoop.fs.FileUtil.symLink(target.toString(), link.toString());  // as RawLocalFs
      if (result != 0) {
        throw new IOException("Error " + result + " creating symlink " + link + " to " + target);
      }
    }

    @Override
    public boolean isValidName(String src) {
      return true;
    }

    @Override
    public FileStatus getFileLinkStatus(Path f) throws IOException {
      return linkStatus(f, this::getFileStatus);
    }

    @Override
    public Path getLinkTarget(Path f) throws IOException {
      throw new AssertionError();  // as RawLocalFs: FileContext resolves local links itself
    }
  }

  interface StatusOf {
    FileStatus of(Path f) throws IOException;
  }

  /** Hadoop's {@code getFileLinkStatus} of a local path (RawLocalFs's, and RawLocalFileSystem's
   * {@code deprecatedGetFileLinkStatusInternal}) with the link read in {@code java.nio}. */
  static FileStatus linkStatus(Path f, StatusOf status) throws IOException {
    String target = readLink(new File(f.toString()));
    try {
      FileStatus fs = status.of(f);
      if (target.isEmpty()) {
        return fs;
      }
      return new FileStatus(fs.getLen(), false, fs.getReplication(), fs.getBlockSize(),
          fs.getModificationTime(), fs.getAccessTime(), fs.getPermission(), fs.getOwner(),
          fs.getGroup(), new Path(target), f);
    } catch (FileNotFoundException e) {
      if (!target.isEmpty()) {  // a dangling link
        return new FileStatus(0, false, 0, 0, 0, 0, FsPermission.getDefault(), "", "",
            new Path(target), f);
      }
      throw e;
    }
  }

  /** What {@code readlink FILE} prints: the link's target, or "" when FILE is not a link (or unreadable). */
  static String readLink(File file) {
    try {
      java.nio.file.Path path = file.toPath();
      return Files.isSymbolicLink(path) ? Files.readSymbolicLink(path).toString() : "";
    } catch (IOException | RuntimeException e) {  // InvalidPathException, SecurityException
      return "";
    }
  }

  static Set<PosixFilePermission> posix(short mode) {
    PosixFilePermission[] bits = {  // from 0400 down to 0001
        PosixFilePermission.OWNER_READ, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_EXECUTE,
        PosixFilePermission.GROUP_READ, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_EXECUTE,
        PosixFilePermission.OTHERS_READ, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_EXECUTE};
    Set<PosixFilePermission> set = EnumSet.noneOf(PosixFilePermission.class);
    for (int i = 0; i < bits.length; i++) {
      if ((mode & (0400 >> i)) != 0) {
        set.add(bits[i]);
      }
    }
    return set;
  }
}
