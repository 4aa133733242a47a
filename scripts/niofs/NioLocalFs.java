package changefeed.niofs;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.ChecksumFs;
import org.apache.hadoop.fs.FsConstants;

/** Like org.apache.hadoop.fs.local.LocalFs (checksummed), over NioRawLocalFs: fs.AbstractFileSystem.file.impl. */
public class NioLocalFs extends ChecksumFs {
  public NioLocalFs(Configuration conf) throws IOException, URISyntaxException {
    this(FsConstants.LOCAL_FS_URI, conf);
  }
  public NioLocalFs(URI theUri, Configuration conf) throws IOException, URISyntaxException {
    super(new NioRawLocalFs(theUri, conf));
  }
}
