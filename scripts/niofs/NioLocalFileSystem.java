package changefeed.niofs;

import org.apache.hadoop.fs.LocalFileSystem;

/** LocalFileSystem (checksummed) over NioRawLocalFileSystem: the value for fs.file.impl. */
public class NioLocalFileSystem extends LocalFileSystem {
  public NioLocalFileSystem() { super(new NioRawLocalFileSystem()); }
}
