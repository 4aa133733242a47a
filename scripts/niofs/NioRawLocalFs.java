package changefeed.niofs;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.DelegateToFileSystem;
import org.apache.hadoop.fs.FsConstants;
import org.apache.hadoop.fs.FsServerDefaults;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.local.LocalConfigKeys;

/** Like org.apache.hadoop.fs.local.RawLocalFs, over NioRawLocalFileSystem. */
public class NioRawLocalFs extends DelegateToFileSystem {
  public NioRawLocalFs(Configuration conf) throws IOException, URISyntaxException {
    this(FsConstants.LOCAL_FS_URI, conf);
  }
  public NioRawLocalFs(URI theUri, Configuration conf) throws IOException, URISyntaxException {
    super(theUri, new NioRawLocalFileSystem(), conf, FsConstants.LOCAL_FS_URI.getScheme(), false);
  }
  @Override public int getUriDefaultPort() { return -1; }
  @Override @Deprecated public FsServerDefaults getServerDefaults() throws IOException {
    return LocalConfigKeys.getServerDefaults();
  }
  @Override public FsServerDefaults getServerDefaults(Path f) throws IOException {
    return LocalConfigKeys.getServerDefaults();
  }
  @Override public boolean isValidName(String src) { return true; }
}
